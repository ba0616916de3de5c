// ninfer::daemon - LRU store of responses bounded by records and bytes.
#include "daemon/responses_store.h"

namespace ninfer::daemon {
namespace {

size_t size_of(const StoredResponse& r) {
    size_t n = r.response_json.size();
    for (const core::ChatMessage& m : r.conversation) {
        n += 64 + m.reasoning_content.value_or("").size();
        for (const core::ContentPart& p : m.content) n += p.text.size();
        for (const core::ToolCall& c : m.tool_calls) n += c.id.size() + c.name.size() + c.arguments_json.size();
    }
    return n;
}

} // namespace

void ResponseStore::put(const std::string& id, StoredResponse record) {
    erase(id);
    size_t bytes = size_of(record);
    if (bytes > max_bytes_) return;
    entries_.push_front({id, std::move(record), bytes});
    index_[id] = entries_.begin();
    bytes_ += bytes;
    evict();
}

const StoredResponse* ResponseStore::get(const std::string& id) {
    auto it = index_.find(id);
    if (it == index_.end()) return nullptr;
    entries_.splice(entries_.begin(), entries_, it->second);
    return &entries_.front().record;
}

bool ResponseStore::erase(const std::string& id) {
    auto it = index_.find(id);
    if (it == index_.end()) return false;
    bytes_ -= it->second->bytes;
    entries_.erase(it->second);
    index_.erase(it);
    return true;
}

void ResponseStore::evict() {
    while (!entries_.empty() && (entries_.size() > max_records_ || bytes_ > max_bytes_)) {
        bytes_ -= entries_.back().bytes;
        index_.erase(entries_.back().id);
        entries_.pop_back();
    }
}

} // namespace ninfer::daemon
