import sys, re, glob, json, collections
pre=sys.argv[1]
res=collections.defaultdict(lambda: collections.defaultdict(dict))
for f in sorted(glob.glob(f"/tmp/emu/t/{pre}-*/out.json")):
    tag=f.split("/")[-2]; parts=tag[len(pre)+1:].split("-"); mode=parts[0]; rnd=parts[-1]
    for line in open(f, errors="replace"):
        line=line.strip().rstrip(",")
        if line.startswith('{"name"'):
            r=json.loads(line)
            if r.get("ns_median"): res[r["label"]][mode][rnd]=(r["ns_median"],r["ns_min"],r["ns_max"])
print("| row | ordinary ns, median (min–max) per boot | kernel mode ns, median (min–max) per boot | ordinary/kernel per round |")
print("|---|---|---|---|")
for row,d in res.items():
    u=d.get("user",{}); k=d.get("kernel",{})
    fmt=lambda x: f"{x[0]:.0f} ({x[1]:.0f}–{x[2]:.0f})"
    rat=[f"{u[r][0]/k[r][0]:.2f}" for r in sorted(u) if r in k]
    print(f"| {row} | {'; '.join(fmt(u[r]) for r in sorted(u))} | {'; '.join(fmt(k[r]) for r in sorted(k))} | {', '.join(rat)} |")
