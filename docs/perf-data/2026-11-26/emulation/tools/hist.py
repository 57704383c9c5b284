import sys, re, bisect, collections
syms=[]
for l in open('/tmp/emu/System.map'):
    a,t,s=l.split()[:3]
    if t in 'tTwW': syms.append((int(a,16),s))
syms.sort(); addrs=[a for a,_ in syms]
def sym(pc):
    if pc < 0xffff800000000000: return f"user {pc:#x}"
    i=bisect.bisect_right(addrs,pc)-1
    return f"{syms[i][1]}+{pc-syms[i][0]:#x}" if i>=0 else hex(pc)
def snaps(path):
    out=[]; cur=None
    for line in open(path):
        if line.startswith("=== "): cur={"t":float(line.split()[1]),"gen":collections.Counter(),"inv":collections.Counter(),"ent":collections.Counter(),"aux":{}}; out.append(cur)
        elif cur is not None:
            m=re.match(r"kml(gen|inv|ent) ([0-9a-f]+) ([0-9a-f]+) (\d+)",line)
            if m:
                k=int(m.group(2),16); cur[m.group(1)][k]=int(m.group(4)); cur["aux"][(m.group(1),k)]=int(m.group(3),16)
    return out
path=sys.argv[1]; skip=float(sys.argv[2]) if len(sys.argv)>2 else 1.5; length=float(sys.argv[3]) if len(sys.argv)>3 else 4
s=snaps(path); tend=s[-1]["t"]-skip
b=max([x for x in s if x["t"]<=tend],key=lambda x:x["t"]); a=min([x for x in s if x["t"]>=b["t"]-length],key=lambda x:x["t"])
dt=b["t"]-a["t"]
for kind in ("ent","gen","inv"):
    d=collections.Counter()
    for x in s:
        if a["t"] < x["t"] <= b["t"]: d.update(x[kind]); b["aux"].update(x["aux"])
    print(f"{kind}: {sum(d.values())/dt:.0f}/s over {dt:.1f}s")
    for k,n in d.most_common(int(sys.argv[4]) if len(sys.argv)>4 else 15):
        aux=b["aux"][(kind,k)]
        if kind in ("gen","ent"):
            pc=k ^ ((aux & 0xffff) << 48) if False else (k & 0xffffffffffff) | (0xffff000000000000 if (k>>47)&1 else 0)
            print(f"  {n/dt:8.0f}/s pc {sym(pc)} flags {aux:#x} cpl {aux&3} ac {(aux>>18)&1}")
        else:
            print(f"  {n/dt:8.0f}/s ram {k:#x} vaddr {aux:#x}")
