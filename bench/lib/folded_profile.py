#!/usr/bin/env python3
"""Where a flame graph's samples went (bench/harness-cost.sh's profile).

    folded_profile.py FILE

FILE holds folded stacks with kernel frames annotated `_[k]`
(`inferno-collapse-perf --all`): it prints the user-space and kernel shares,
the kernel's share for the network receive work done on behalf of the peer,
and the kernel's share by system call.
"""
import re
import sys

# Kernel frames that mark the peer's side of loopback (its receive processing
# and wake-up) and the syscall entry points.
PEER = ("tcp_v4_rcv", "sock_def_readable", "tcp_data_queue")
# A system call's entry, under whichever name the kernel kept after inlining.
SYSCALL = re.compile(r"(?:__x64_sys_|__do_sys_|__sys_|ksys_)(\w+?)_\[k\]$")


def folded(path):
    total = kernel = peer = 0
    by_call = {}
    with open(path) as f:
        for line in f:
            stack, _, count = line.rstrip().rpartition(" ")
            n = int(count)
            frames = stack.split(";")
            total += n
            if frames[-1].endswith("_[k]"):
                kernel += n
                if any(p in fr for fr in frames for p in PEER):
                    peer += n
                call = next((m.group(1) for fr in frames if (m := SYSCALL.match(fr))),
                            "(no system call: interrupts, scheduling)")
                by_call[call] = by_call.get(call, 0) + n
    if not total:
        print("no samples")
        return
    pct = lambda n: f"{100 * n / total:5.1f} %"
    print(f"sampled CPU time: {total / 1e9:.2f} s")
    print(f"user space: {pct(total - kernel)}   kernel: {pct(kernel)}")
    print(f"  of which receive processing and wake-ups of the other end (tcp_v4_rcv, tcp_data_queue,")
    print(f"  sock_def_readable in the stack): {pct(peer)}")
    print("kernel by system call:")
    for call, n in sorted(by_call.items(), key=lambda kv: -kv[1])[:12]:
        print(f"  {call:40} {pct(n)}")



if __name__ == "__main__":
    folded(sys.argv[1])
