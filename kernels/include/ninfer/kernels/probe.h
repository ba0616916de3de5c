// ninfer::kernels - the step timeline probe: a diagnostic build (-DNINFER_GPU_PROBE=ON) in which
// every PDL kernel's blocks stamp %globaltimer when they start (ninfer_grid_launch_dependents) and
// around their wait (ninfer_grid_wait), with the grid's %gridid, the block and its SM, into a device
// buffer while the probe is armed. bench_decode writes one decode step's stamps when the
// environment names NINFER_PROBE_OUT; tests/gpu/probe_report.py turns them into each launch's share
// of the chain (kernels/PERF_NOTES.md, session 11 run 4). A scratch probe build may also place marks
// inside kernels (probe.cuh: probe_mark; events with threads = 0, their tag in t_wait; session 13
// run 9). In a normal build the kernels carry none of it and these functions do nothing.
//
// Contract: probe_arm(true) clears the buffer (1M events, 48 bytes each) and starts recording;
// probe_arm(false) stops it; both synchronise the device and must not run inside a graph capture.
// probe_dump writes the recorded events as CSV (grid, block, nblocks, threads, smid, t_start,
// t_wait, t_go: ns of the GPU's global timer) and returns their count (events past the buffer are
// dropped, and counted in the return value's excess over the rows written), or -1 if the file could
// not be written.
#pragma once

#include <cstdint>

namespace ninfer::kernels {

bool probe_built();
void probe_arm(bool on);
int64_t probe_dump(const char* path);

} // namespace ninfer::kernels
