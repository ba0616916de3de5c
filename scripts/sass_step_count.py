#!/usr/bin/env python3
# ninfer - static SASS counts of a kernel's step loop from a cubin, for machines without cuobjdump or
# nvdisasm (this one has neither): sm_90 instructions are 16 bytes; the opcode class is read from the
# encoding's low 9 bits (names below are the usual sm_7x-9x ones; unknown classes print as hex).
# The "step region" runs from the last backward branch before the kernel's first HMMA (the ring's
# mbarrier spin) to the first backward branch after its last HMMA (the loop's back edge).
#
# Usage: nvcc ... -arch=sm_90a -cubin -o k.cubin kernels/src/gemv_pipe.cu
#        scripts/sass_step_count.py k.cubin "<(WeightFormat)2, 1, 2, true, false>" "<(WeightFormat)2, 1, 2, true, true>"
# (substrings of the demangled kernel names; with two, the second is compared with the first).
import collections, re, struct, subprocess, sys

NAMES = {0x03c: 'HMMA', 0x012: 'LOP3', 0x024: 'IMAD', 0x023: 'FFMA', 0x031: 'HFMA2', 0x030: 'HADD2', 0x020: 'FMUL',
         0x021: 'FADD', 0x019: 'SHF', 0x016: 'PRMT', 0x184: 'LDS', 0x181: 'LDG', 0x183: 'LDL', 0x187: 'STL',
         0x118: 'NOP', 0x147: 'BRA', 0x002: 'MOV', 0x00c: 'ISETP', 0x010: 'IADD3', 0x011: 'LEA', 0x007: 'SEL',
         0x008: 'FSEL', 0x186: 'STG', 0x188: 'STS', 0x189: 'SHFL', 0x00b: 'FSETP', 0x025: 'IMAD.WIDE'}


def sections(path):
    d = open(path, 'rb').read()
    shoff, = struct.unpack_from('<Q', d, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from('<HHH', d, 0x3a)
    secs = [struct.unpack_from('<IIQQQQIIQQ', d, shoff + i * shentsize) for i in range(shnum)]
    names = secs[shstrndx][4]
    for s in secs:
        name = d[names + s[0]: d.index(b'\0', names + s[0])].decode()
        if name.startswith('.text.'):
            dem = subprocess.run(['c++filt', name[6:]], capture_output=True, text=True).stdout.strip()
            yield re.sub(r'ninfer::kernels::(detail::)?', '', dem), d[s[4]: s[4] + s[5]]


def step(path, key):
    for name, code in sections(path):
        if key not in name:
            continue
        ops = [struct.unpack_from('<Q', code, 16 * i)[0] for i in range(len(code) // 16)]
        def back(lo):  # a branch whose signed offset (bits 32..63, in instructions) is negative
            return lo & 0x1ff == 0x147 and (lo >> 63) & 1
        hmma = [i for i, lo in enumerate(ops) if lo & 0x1ff == 0x03c]
        start = max([i for i, lo in enumerate(ops) if back(lo) and i < hmma[0]], default=-1) + 1
        end = min([i for i, lo in enumerate(ops) if back(lo) and i > hmma[-1]], default=len(ops) - 1)
        hist = collections.Counter(NAMES.get(lo & 0x1ff, hex(lo & 0x1ff)) for lo in ops[start:end + 1])
        return name, len(ops), end - start + 1, len(hmma), hist
    sys.exit(f'no kernel matching {key}')


def show(h):
    return ' '.join(f'{k}:{v}' for k, v in sorted(h.items(), key=lambda kv: -kv[1]))


runs = [step(sys.argv[1], key) for key in sys.argv[2:]]
for name, total, region, hmma, hist in runs:
    print(f'{name[:90]}\n  {total} instructions, step region {region} with {hmma} HMMA: {show(hist)}')
if len(runs) == 2:
    a, b = runs[0][4], runs[1][4]
    print('  second - first:', ' '.join(f'{k}:{b[k] - a[k]:+d}' for k in sorted(set(a) | set(b), key=lambda k: b[k] - a[k])
                                      if b[k] != a[k]))
