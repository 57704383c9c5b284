import socket, sys, time, os
path, out, period = sys.argv[1], sys.argv[2], float(sys.argv[3])
t0 = time.time()
while not os.path.exists(path):
    time.sleep(0.05)
    if time.time() - t0 > 60: sys.exit(1)
time.sleep(0.5)
s = socket.socket(socket.AF_UNIX); s.connect(path)
s.settimeout(10)
def rd():
    buf = b""
    while True:
        try: d = s.recv(65536)
        except socket.timeout: break
        if not d: raise EOFError
        buf += d
        if buf.endswith(b"(qemu) "): break
    return buf.decode(errors="replace")
rd()
def qpid():
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try:
            if os.readlink(f"/proc/{p}/exe").endswith("qemu-system-x86_64") and path.encode() in open(f"/proc/{p}/cmdline","rb").read():
                return p
        except OSError: pass
pid = qpid()
def cpu():
    out=[]
    try:
        for t in sorted(os.listdir(f"/proc/{pid}/task")):
            st=open(f"/proc/{pid}/task/{t}/stat").read()
            comm=st[st.index("(")+1:st.rindex(")")]; f=st[st.rindex(")")+2:].split()
            st2=open(f"/proc/{pid}/task/{t}/status").read()
            vol=[l.split()[1] for l in st2.splitlines() if l.startswith(("voluntary_ctxt","nonvoluntary_ctxt"))]
            out.append(f"task {t} {comm.replace(' ','_')} utime {f[11]} stime {f[12]} vcs {vol[0]} nvcs {vol[1]}")
    except OSError: pass
    return "\n".join(out)
with open(out, "w") as f:
    try:
        while True:
            s.sendall(b"info jit\n"); t = time.time()
            txt = rd()
            f.write(f"=== {t:.3f}\n{txt}\n{cpu()}\n"); f.flush()
            time.sleep(period)
    except (EOFError, OSError, BrokenPipeError):
        pass
