// ninfer::core - the one exception type core throws at its API boundary.
//
// Contract: messages are one line, start with the subsystem ("artifact: ", "convert: ", ...) and
// name the problem and the offending value, so a user can act on them without a debugger.
// The engine thread catches at task boundaries and converts to protocol errors; tools print
// what() and exit 1.
#pragma once

#include <stdexcept>
#include <string>

namespace ninfer {

class Error : public std::runtime_error {
  public:
    explicit Error(const std::string& message) : std::runtime_error(message) {}
};

} // namespace ninfer
