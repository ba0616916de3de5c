// ninfer::core - WeightBinder: resolves logical parameters by name and checks their shapes (the
// text model's and the vision tower's binders share it; weights.cpp implements it).
//
// Contract: get(name) returns the binding or throws ninfer::Error("weights: missing parameter
// NAME"); matrix(name, rows, cols) and vector(name, shape) also check the logical shape
// ("weights: NAME: shape [..], the config needs [..]"); vector decodes every element to f32 (norms,
// biases, small tables) while a Matrix keeps its rows in their stored format.
// Thread safety: a binder is used by one thread while it binds.
#pragma once

#include "core/model/weights.h"

#include <cstdint>
#include <string>
#include <vector>

namespace ninfer::core {

class WeightBinder {
  public:
    explicit WeightBinder(const BindingLookup& lookup) : lookup_(lookup) {}

    const WeightBinding& get(const std::string& name);
    Matrix matrix(const std::string& name, uint64_t rows, uint64_t cols);
    std::vector<float> vector(const std::string& name, std::vector<uint64_t> shape);

  private:
    const BindingLookup& lookup_;
};

} // namespace ninfer::core
