// InvocationTable: records by id plus insertion-ordered secondary indexes.
#include "mem/mem_state_backend_tables.h"

namespace pynenc_cpp::mem {

void InvocationTable::Upsert(const InvocationRecord& record) {
  auto it = by_id_.find(record.invocation_id);
  if (it == by_id_.end()) {
    Entry entry{next_sequence_++, record};
    AddToIndexes(entry);
    by_id_.emplace(record.invocation_id, std::move(entry));
    return;
  }
  RemoveFromIndexes(it->second);
  it->second.record = record;
  AddToIndexes(it->second);
}

const InvocationRecord* InvocationTable::Find(const InvocationId& id) const {
  auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &it->second.record;
}

std::vector<InvocationId> InvocationTable::Children(const InvocationId& parent) const {
  return Lookup(by_parent_, parent.str());
}

std::vector<InvocationId> InvocationTable::ByParentEvent(const std::string& event_id) const {
  return Lookup(by_event_, event_id);
}

std::vector<InvocationId> InvocationTable::ByWorkflow(
    const std::optional<std::string>& workflow_id,
    const std::optional<std::string>& workflow_type) const {
  const bool by_id = workflow_id && !workflow_id->empty();
  const bool by_type = workflow_type && !workflow_type->empty();
  if (by_id) {
    std::vector<InvocationId> out;
    for (InvocationId& id : Lookup(by_workflow_id_, *workflow_id)) {
      if (by_type && by_id_.at(id).record.workflow->workflow_type.str() != *workflow_type) continue;
      out.push_back(std::move(id));
    }
    return out;
  }
  if (by_type) return Lookup(by_workflow_type_, *workflow_type);
  std::vector<InvocationId> out;
  out.reserve(in_any_workflow_.size());
  for (const auto& [sequence, id] : in_any_workflow_) out.push_back(id);
  return out;
}

void InvocationTable::Clear() {
  by_id_.clear();
  by_parent_.clear();
  by_event_.clear();
  by_workflow_id_.clear();
  by_workflow_type_.clear();
  in_any_workflow_.clear();
  // next_sequence_ keeps growing: orders stay consistent across purges.
}

void InvocationTable::AddToIndexes(const Entry& entry) {
  const InvocationRecord& r = entry.record;
  if (r.parent_invocation_id) {
    by_parent_[r.parent_invocation_id->str()].emplace(entry.sequence, r.invocation_id);
  }
  if (r.parent_event_id) by_event_[*r.parent_event_id].emplace(entry.sequence, r.invocation_id);
  if (r.workflow) {
    by_workflow_id_[r.workflow->workflow_id.str()].emplace(entry.sequence, r.invocation_id);
    by_workflow_type_[r.workflow->workflow_type.str()].emplace(entry.sequence, r.invocation_id);
    in_any_workflow_.emplace(entry.sequence, r.invocation_id);
  }
}

void InvocationTable::RemoveFromIndexes(const Entry& entry) {
  auto erase = [&](Index& index, const std::string& key) {
    auto it = index.find(key);
    if (it == index.end()) return;
    it->second.erase(entry.sequence);
    if (it->second.empty()) index.erase(it);
  };
  const InvocationRecord& r = entry.record;
  if (r.parent_invocation_id) erase(by_parent_, r.parent_invocation_id->str());
  if (r.parent_event_id) erase(by_event_, *r.parent_event_id);
  if (r.workflow) {
    erase(by_workflow_id_, r.workflow->workflow_id.str());
    erase(by_workflow_type_, r.workflow->workflow_type.str());
    in_any_workflow_.erase(entry.sequence);
  }
}

std::vector<InvocationId> InvocationTable::Lookup(const Index& index, const std::string& key) {
  std::vector<InvocationId> out;
  auto it = index.find(key);
  if (it == index.end()) return out;
  out.reserve(it->second.size());
  for (const auto& [sequence, id] : it->second) out.push_back(id);
  return out;
}

}  // namespace pynenc_cpp::mem
