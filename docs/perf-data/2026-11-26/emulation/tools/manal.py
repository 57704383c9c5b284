import sys, re, glob, json, statistics, collections
sys.path.insert(0,'/tmp/emu')
from rates import parse
LABEL={"getppid":"Null syscall: getppid","stat":"stat","open_close":"open + close","select_tcp_10":"select() on 10 TCP fds",
"select_tcp_500":"select() on 500 TCP fds","pipe_rtt":"Pipe round trip","unix_rtt":"AF_UNIX stream round trip","fork_exec":"fork + execve + waitpid"}
def result(d):
    for line in open(f"{d}/out.txt",errors="replace"):
        m=re.match(r"[\d.]+ \| (.+?) \| ([\d.]+) \| ([\d.]+) \| ([\d.]+)\D+([\d.]+) \| (\d+) \|",line)
        if m and m.group(1)!="Benchmark": return float(m.group(2)),float(m.group(4)),float(m.group(5))
def steady(d):
    s=parse(f"{d}/mon.txt"); t0=s[0]["t"]
    iv=[(a,b) for a,b in zip(s,s[1:]) if b["t"]-t0>2.5 and (b["c"].get(14,0)-a["c"].get(14,0))/(b["t"]-a["t"])<2000 and (b["c"].get(10,0)-a["c"].get(10,0))/(b["t"]-a["t"])>1e6 and (b["c"].get(13,0)-a["c"].get(13,0))/(b["t"]-a["t"])>50e3]
    iv=iv[:-1]  # drop the last (exit)
    if len(iv)<2: return None
    # longest consecutive stretch
    best=[];cur=[]
    for p in iv:
        if cur and cur[-1][1] is p[0]: cur.append(p)
        else: cur=[p]
        if len(cur)>len(best): best=list(cur)
    return best[0][0],best[-1][1]
K={"fills":[0,2,4],"fill KSMAP":[0],"fill USER":[2],"fill KNOSMAP":[4],"victim hits":[19],"jmp-cache misses":[11],"TB entries from main loop":[13],"tb_gen_code":[14],"CR3 writes":[24],"interrupts":[16],"PAUSE exits":[27],"lookup_tb_ptr":[10],"exceptions":[15]}
rows=collections.defaultdict(lambda: collections.defaultdict(list))
for d in sorted(glob.glob("/tmp/emu/r/"+(sys.argv[1] if len(sys.argv)>1 else "m")+"-*")):
    name=d.split("/")[-1][2:]; row,mode,rnd=name.rsplit("-",2)
    r=result(d); w=steady(d)
    if not r or not w: print("skip",d); continue
    a,b=w; dt=b["t"]-a["t"]; ns=r[0]
    cpu=(b["x"]["cpu_ms_main"]-a["x"]["cpu_ms_main"])/1000; share=cpu/dt
    ops=dt*1e9/ns
    per={k:sum(b["c"].get(i,0)-a["c"].get(i,0) for i in v)/ops for k,v in K.items()}
    rows[row][mode].append(dict(ns=ns,mn=r[1],mx=r[2],share=share,cpuns=share*ns,dt=dt,per=per))
json.dump(rows,open("/tmp/emu/manal-"+(sys.argv[1] if len(sys.argv)>1 else "m")+".json","w"),indent=1)
print("| row | mode | wall ns/op per boot | QEMU CPU share | CPU ns/op | " + " | ".join(K) + " |")
for row in LABEL:
    for mode in ("user","kernel"):
        xs=rows[row][mode]
        if not xs: continue
        a=", ".join("%.0f" % x["ns"] for x in xs)
        b=", ".join("%.0f%%" % (x["share"]*100) for x in xs)
        c=", ".join("%.0f" % x["cpuns"] for x in xs)
        dd=" | ".join("%.1f" % statistics.mean(x["per"][k] for x in xs) for k in K)
        print("| %s | %s | %s | %s | %s | %s |" % (LABEL[row], mode, a, b, c, dd))
