#!/usr/bin/env python3
# ninfer - size of a kernel's step loop from a cubin, by real disassembly: the whole loop body from
# its head to the back edge after the last HMMA (the mbarrier wait, the ring loads and lane 0's
# bulk-copy requests included, which scripts/sass_step_count.py's region leaves out), counted by
# mnemonic. Needs an nvdisasm: Debian bookworm's non-free nvidia-cuda-toolkit (11.8) has one, e.g.
#   apt-get download nvidia-cuda-toolkit (with a sources list naming bookworm non-free; dpkg -x it)
# and CUDA 13 cubins are read after their ELF header is given the older ABI version and sm_90 flags
# (done here on a copy). Usage: NVDISASM=path scripts/sass_loop_count.py k.cubin SUBSTRING...
# (substrings of the mangled kernel name, e.g. WeightFormatE2ELi1ELi2ELb1E).
import collections, os, re, struct, subprocess, sys, tempfile

cubin, keys = sys.argv[1], sys.argv[2:]
d = bytearray(open(cubin, 'rb').read())
d[8] = 7                                      # EI_ABIVERSION as 11.8 writes it
struct.pack_into('<I', d, 0x30, 0x5a055a)      # e_flags: sm_90, virtual sm_90, 64-bit, unified textures
with tempfile.NamedTemporaryFile(suffix='.cubin', delete=False) as f:
    f.write(d)
try:
    sass = subprocess.run([os.environ.get('NVDISASM', 'nvdisasm'), '-c', f.name], capture_output=True, text=True,
                          check=True).stdout
finally:
    os.unlink(f.name)
funcs, cur = {}, None
for line in sass.splitlines():
    m = re.match(r'\s*\.text\.(\S+):', line)
    if m:
        cur = m.group(1)
        funcs[cur] = []
        continue
    m = re.match(r'\s*/\*([0-9a-f]{4,})\*/\s+(.*?);', line)
    if m and cur:
        funcs[cur].append((int(m.group(1), 16), m.group(2).strip()))
    m = re.match(r'^(\.L_x_\d+):', line)
    if m and cur:
        funcs[cur].append((None, m.group(1)))
for name, ins in funcs.items():
    if not all(k in name for k in keys):
        continue
    labels, code = {}, []
    for a, t in ins:
        if a is None:
            labels[t] = len(code)
        else:
            code.append((a, t))
    hm = [i for i, (a, t) in enumerate(code) if 'HMMA' in t]
    loop = None
    for i, (a, t) in enumerate(code):
        m = re.search(r'BRA\s+`\((\.L_x_\d+)\)', t)
        if hm and m and i > hm[-1] and labels.get(m.group(1), 1 << 30) < hm[0]:
            loop = (labels[m.group(1)], i)
            break
    if not loop:
        print(f'{name}: no loop around the HMMAs')
        continue
    s, e = loop
    ops = collections.Counter(re.sub(r'^@!?U?P\w+\s+', '', t).split()[0].split('.')[0] for a, t in code[s:e + 1])
    print(f'{name}\n  loop {e - s + 1} instructions: ' + ' '.join(f'{k}:{v}' for k, v in ops.most_common()))
