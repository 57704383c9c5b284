import sys, re
NAMES = {0:"fill KSMAP64",1:"fill KSMAP32",2:"fill USER64",3:"fill USER32",4:"fill KNOSMAP64",5:"fill KNOSMAP32",6:"fill PHYS",7:"fill NESTED",
8:"fill (code fetch)",9:"fill faults",10:"lookup_tb_ptr calls",11:"jmp-cache misses",12:"lookup_tb_ptr -> NULL",13:"TB entries from cpu_exec loop",
14:"tb_gen_code",15:"exceptions delivered",16:"interrupts delivered",17:"tlb_flush (index set)",18:"tlb_flush_page",19:"victim TLB hits",20:"TLB resizes",
27:"PAUSE exits",21:"cpu_exec calls",22:"longjmp to cpu_exec",24:"CR3 writes",25:"CR4 writes",26:"INVLPG -> whole-index flush",
32:"flush idx KSMAP64",34:"flush idx USER64",36:"flush idx KNOSMAP64",38:"flush idx PHYS",40:"bytes memset by flushes",48:"lp-flush KSMAP64",50:"lp-flush USER64",52:"lp-flush KNOSMAP64"}
def parse(path):
    snaps=[]; cur=None
    for line in open(path):
        if line.startswith("=== "):
            cur={"t":float(line.split()[1]),"c":{},"tlb":{},"x":{}}; snaps.append(cur)
        elif cur is not None:
            m=re.match(r"kmlc (\d+) (\d+)",line)
            if m: cur["c"][int(m.group(1))]=int(m.group(2))
            m=re.match(r"kmltlb cpu(\d+) idx(\d+) entries (\d+) used (\d+)",line)
            if m: cur["tlb"][(int(m.group(1)),int(m.group(2)))]=(int(m.group(3)),int(m.group(4)))
            m=re.match(r"task (\d+) (\S+) utime (\d+) stime (\d+) vcs (\d+) nvcs (\d+)",line)
            if m:
                nm=m.group(2)
                k="vcpu" if nm.startswith("CPU") else ("main" if nm.startswith("qemu") else "other")
                cur["x"]["cpu_ms_"+k]=cur["x"].get("cpu_ms_"+k,0)+10*(int(m.group(3))+int(m.group(4)))
                cur["x"]["vol_cs_"+k]=cur["x"].get("vol_cs_"+k,0)+int(m.group(5))
                cur["x"]["invol_cs_"+k]=cur["x"].get("invol_cs_"+k,0)+int(m.group(6))
            m=re.match(r"(TB count|TB invalidate count|TB flush count|TLB full flushes|TLB partial flushes|TLB elided flushes)\s+(\d+)",line)
            if m: cur["x"][m.group(1)]=int(m.group(2))
    return [s for s in snaps if s["c"]]
def window(path, ns_per_op, skip_end=1.5, length=5.0):
    s=parse(path)
    tend=s[-1]["t"]-skip_end
    b=max([x for x in s if x["t"]<=tend], key=lambda x:x["t"])
    a=min([x for x in s if x["t"]>=b["t"]-length], key=lambda x:x["t"])
    dt=b["t"]-a["t"]; ops=dt*1e9/ns_per_op
    per={k:(b["c"].get(k,0)-a["c"].get(k,0))/ops for k in set(a["c"])|set(b["c"])}
    perx={k:(b["x"].get(k,0)-a["x"].get(k,0))/ops for k in b["x"]}
    perx["vcpu CPU share (%)"]=(b["x"].get("cpu_ms_vcpu",0)-a["x"].get("cpu_ms_vcpu",0))/(dt*10)
    perx["vcpu CPU us/op"]=(b["x"].get("cpu_ms_vcpu",0)-a["x"].get("cpu_ms_vcpu",0))*1000/ops
    return dt, ops, per, perx, b["tlb"]
if __name__=="__main__":
    cols=[]
    for arg in sys.argv[1:]:
        path,ns=arg.split("@"); cols.append((path,window(path,float(ns))))
    print("| counter | "+" | ".join(p.split("/")[-2] for p,_ in cols)+" |")
    keys=sorted(set().union(*[set(w[2]) for _,w in cols]))
    for k in keys:
        print(f"| {NAMES.get(k,k)} | "+" | ".join(f"{w[2].get(k,0):.2f}" for _,w in cols)+" |")
    for k in cols[0][1][3]:
        print(f"| {k} | "+" | ".join(f"{w[3].get(k,0):.3f}" for _,w in cols)+" |")
    for _,w in cols:
        print("window", f"{w[0]:.1f}s ops={w[1]:.0f}", " ".join(f"{i}:{e}/{u}" for (c,i),(e,u) in sorted(w[4].items()) if i in (0,2,4)))
