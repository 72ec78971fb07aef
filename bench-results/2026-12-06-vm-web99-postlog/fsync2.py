import os, sys, time, resource
def writes():
    for l in open('/proc/diskstats'):
        f=l.split()
        if f[2]=='vda': return int(f[7]), int(f[9])  # writes completed, sectors written
mode=sys.argv[1]; n=int(sys.argv[2])
p=f"/tmp/p3/fs-{mode}.log"
if os.path.exists(p): os.unlink(p)
fd=os.open(p, os.O_RDWR|os.O_CREAT, 0o644)
os.pwrite(fd, b"0000000000\n", 0)
if mode=="prealloc":
    os.pwrite(fd, b"\0"*(1<<20), 11); os.fsync(fd)
rec=b"x"*138+b"\n"
w0=writes(); r0=resource.getrusage(resource.RUSAGE_SELF)
for i in range(n):
    os.pwrite(fd, rec, 11+i*139)
    os.fdatasync(fd)
r1=resource.getrusage(resource.RUSAGE_SELF); w1=writes()
cpu=(r1.ru_utime-r0.ru_utime)+(r1.ru_stime-r0.ru_stime)
print(f"{mode}: cpu {cpu/n*1e6:.1f} us/op, disk writes/op {(w1[0]-w0[0])/n:.2f}, sectors/op {(w1[1]-w0[1])/n:.1f}")
