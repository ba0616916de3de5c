// ninfer::daemon - the bounded in-memory store behind GET/DELETE /v1/responses/{id} and
// previous_response_id.
//
// Contract:
// - put(id, record) keeps the record and evicts the least recently used ones while the store
//   holds more than max_records records or more than max_bytes bytes (a record's bytes: its
//   response JSON plus its conversation's texts). A record larger than max_bytes alone is not
//   kept. get(id) returns the record (and marks it used) or nullptr; erase(id) says whether it
//   was there.
// - A record holds the rendered response object and the conversation a follow-up continues:
//   the input messages (previous ones included, instructions excluded) and the output.
// Loop thread only.
#pragma once

#include "core/frontend/chat_messages.h"

#include <cstddef>
#include <list>
#include <string>
#include <unordered_map>
#include <vector>

namespace ninfer::daemon {

struct StoredResponse {
    std::string response_json;
    std::vector<core::ChatMessage> conversation;
};

class ResponseStore {
  public:
    explicit ResponseStore(size_t max_records = 1024, size_t max_bytes = size_t(64) << 20)
        : max_records_(max_records), max_bytes_(max_bytes) {}
    void put(const std::string& id, StoredResponse record);
    const StoredResponse* get(const std::string& id);
    bool erase(const std::string& id);
    size_t size() const { return entries_.size(); }
    size_t bytes() const { return bytes_; }

  private:
    struct Entry {
        std::string id;
        StoredResponse record;
        size_t bytes = 0;
    };
    void evict();
    size_t max_records_;
    size_t max_bytes_;
    size_t bytes_ = 0;
    std::list<Entry> entries_; // most recently used first
    std::unordered_map<std::string, std::list<Entry>::iterator> index_;
};

} // namespace ninfer::daemon
