#include "foundry/KernelCache.h"

#include <cstring>
#include <filesystem>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "foundry/AtomicFile.h"
#include "foundry/Error.h"
#include "foundry/Hash.h"

namespace foundry {

KernelCache::KernelCache(std::shared_ptr<const ShaderCompiler> compiler, std::shared_ptr<const DiskCache> disk,
                         std::string dumpDirectory)
    : compiler_(std::move(compiler)), disk_(std::move(disk)), dumpDirectory_(std::move(dumpDirectory)) {}

std::string KernelCache::keyFor(const KernelSource& source) const {
  return Hasher().field(source.glsl).field(compiler_->identity(source)).hex();
}

std::shared_ptr<const Spirv> KernelCache::spirv(const KernelSource& source) {
  const std::string key = keyFor(source);
  std::unique_lock lock(mutex_);
  for (;;) {
    if (auto it = memory_.find(key); it != memory_.end()) {
      ++memoryHits_;
      return it->second;
    }
    if (!producing_.count(key)) break;
    produced_.wait(lock);  // another thread compiles it; if that fails, this one tries in turn
  }
  producing_.insert(key);
  lock.unlock();
  std::pair<std::shared_ptr<const Spirv>, bool> made;
  try {
    made = produce(source, key);
  } catch (...) {
    lock.lock();
    producing_.erase(key);
    produced_.notify_all();
    throw;
  }
  lock.lock();
  producing_.erase(key);
  if (made.second) fromDisk_.insert(key);
  auto& slot = memory_.emplace(key, std::move(made.first)).first->second;
  produced_.notify_all();
  return slot;
}

std::pair<std::shared_ptr<const Spirv>, bool> KernelCache::produce(const KernelSource& source, const std::string& key) {
  if (!dumpDirectory_.empty()) dumpKernel(dumpDirectory_, source);
  if (auto code = loadFromDisk(key, source.usesCoopMat2)) {
    ++diskHits_;
    return {std::move(code), true};
  }
  return {compileAndStore(source, key), false};
}

bool KernelCache::fromDisk(const KernelSource& source) {
  std::lock_guard lock(mutex_);
  return fromDisk_.count(keyFor(source)) != 0;
}

std::shared_ptr<const Spirv> KernelCache::rebuild(const KernelSource& source) {
  const std::string key = keyFor(source);
  auto code = compileAndStore(source, key);
  std::lock_guard lock(mutex_);
  fromDisk_.erase(key);
  return memory_[key] = std::move(code);
}

std::shared_ptr<const Spirv> KernelCache::loadFromDisk(const std::string& key, bool coopMat2) {
  if (!disk_) return nullptr;
  const auto bytes = disk_->load("spirv", key);
  if (!bytes) return nullptr;
  auto words = std::make_shared<Spirv>(bytes->size() / 4);
  std::memcpy(words->data(), bytes->data(), words->size() * 4);
  const std::string problem =
      bytes->size() % 4 != 0 ? std::string("is not a whole number of 32-bit words") : compiler_->rejects(*words, coopMat2);
  if (!problem.empty()) {
    disk_->evict("spirv", key, "holds SPIR-V that " + problem);
    return nullptr;
  }
  return words;
}

std::shared_ptr<const Spirv> KernelCache::compileAndStore(const KernelSource& source, const std::string& key) {
  ++compiles_;
  auto words = std::make_shared<Spirv>(compiler_->compile(source));
  if (disk_) {
    disk_->store("spirv", key, std::span(reinterpret_cast<const std::byte*>(words->data()), words->size() * 4));
  }
  return words;
}

void dumpKernel(const std::string& directory, const KernelSource& source) {
  std::error_code ec;
  std::filesystem::create_directories(directory, ec);
  if (ec || !std::filesystem::is_directory(directory)) {
    throw DeviceError(fmt::format("cannot create the kernel dump directory {}: {}", directory,
                                  ec ? ec.message() : "a file is in the way"));
  }
  nlohmann::json j;
  j["name"] = source.name;
  j["hash"] = source.hash;
  j["stages"] = source.stages;
  j["stage_keys"] = source.stageKeys;
  j["workgroup"] = source.layout.workgroup;
  j["subgroup_size"] = source.layout.subgroupSize;
  j["shared_bytes"] = source.layout.sharedBytes;
  j["push_bytes"] = source.layout.pushBytes;
  j["uses_cooperative_matrix"] = source.usesCoopMat;
  j["uses_cooperative_matrix2"] = source.usesCoopMat2;
  for (const auto& b : source.layout.bindings) {
    j["bindings"].push_back({{"name", b.name}, {"binding", b.binding}, {"dtype", dtypeName(b.dtype)},
                             {"glsl", b.glslElement}, {"access", accessName(b.access)}});
  }
  for (const auto& p : source.layout.push) {
    j["push_constants"].push_back({{"name", p.name}, {"type", pushTypeGlsl(p.type)}, {"offset", p.offset}});
  }
  for (const auto& [k, v] : source.notes) j["decisions"][k] = v;
  const auto base = std::filesystem::path(directory) / source.name;
  writeFileAtomically(base.string() + ".comp", source.glsl);
  writeFileAtomically(base.string() + ".json", j.dump(2) + "\n");
}

}  // namespace foundry
