// ninfer::core - test-only fault injection on the engine thread: NINFER_FAULT=engine_step:N makes
// the backend fail as a faulting device would at the N-th scheduler step that has work.
//
// Contract:
// - engine_fault_step(value) reads NINFER_FAULT's value (nullptr: unset). "engine_step:N" with N a
//   whole number 1..10^9 gives N; a value that does not start with "engine_step:" gives 0 (none for
//   the engine: other fault points of the project read the same variable, e.g. before_rename in
//   core/util/file_io.cpp); "engine_step:" followed by anything else throws
//   ninfer::Error("engine: NINFER_FAULT=...: ..."), so a mistyped test fails at start-up.
// - EngineFault counts the steps with work it is told about (count_step: 1 = the first) and says
//   when the armed one comes; the engine then calls Backend::inject_fault(describe()) before that
//   step, which throws what the device's own checks throw (a real sticky CUDA error on the CUDA
//   backend, core/cuda/device_fault.h; an Error of the backend's name elsewhere), and the engine's
//   failure path runs as for any backend error (engine.h).
// Engine thread only.
#pragma once

#include <cstdint>
#include <string>

namespace ninfer::core {

uint64_t engine_fault_step(const char* value);

class EngineFault {
  public:
    explicit EngineFault(uint64_t step) : step_(step) {}
    bool armed() const { return step_ > 0; }
    bool count_step() { return step_ > 0 && ++seen_ == step_; } // true: inject before this step
    std::string describe() const { return "NINFER_FAULT=engine_step:" + std::to_string(step_); }

  private:
    uint64_t step_ = 0, seen_ = 0;
};

} // namespace ninfer::core
