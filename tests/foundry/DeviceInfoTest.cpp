#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "foundry/CoopMatProbe.h"
#include "foundry/DeviceInfo.h"
#include "foundry/Error.h"

namespace foundry {
namespace {

using ::testing::HasSubstr;

TEST(DeviceInfo, PresetsDescribeTheDevicesTheyName) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  EXPECT_EQ(h200.subgroupSize, 32u);
  EXPECT_EQ(h200.maxSharedMemoryBytes, 49152u);
  EXPECT_EQ(h200.computeUnits, 132u);
  EXPECT_TRUE(h200.hasCoopMat({16, 16, 16, DType::F16, DType::F32}));
  EXPECT_TRUE(h200.coopMatLayout.quad());
  const DeviceInfo lavapipe = parseDevicePreset("lavapipe");
  EXPECT_EQ(lavapipe.subgroupSize, 8u);
  EXPECT_EQ(lavapipe.maxSharedMemoryBytes, 32768u);
  EXPECT_EQ(lavapipe.maxStorageBufferRange, 134217728u);
  EXPECT_TRUE(lavapipe.coopMatShapes.empty());
  const DeviceInfo rdna3 = parseDevicePreset("amd-rdna3");
  EXPECT_EQ(rdna3.subgroupSize, 64u);
  EXPECT_EQ(rdna3.minSubgroupSize, 32u);
  EXPECT_EQ(rdna3.maxSubgroupSize, 64u);
}

TEST(DeviceInfo, NewPresetsDescribeTheirDevices) {
  const DeviceInfo ada = parseDevicePreset("ada");
  EXPECT_EQ(ada.vendor, Vendor::Nvidia);
  EXPECT_EQ(ada.subgroupSize, 32u);
  EXPECT_EQ(ada.maxSharedMemoryBytes, 49152u);
  EXPECT_EQ(ada.coopMatShapes, nvidiaCoopMatShapes());
  EXPECT_EQ(ada.coopMatLayout, nvidiaQuadLayout());
  EXPECT_EQ(ada.computeUnits, 128u);
  EXPECT_EQ(ada.deviceMemoryBytes, 24ull << 30);

  DeviceInfo wave32 = parseDevicePreset("amd-rdna3-wave32");
  EXPECT_EQ(wave32.subgroupSize, 32u);
  wave32.subgroupSize = 64;
  wave32.name = parseDevicePreset("amd-rdna3").name;
  EXPECT_EQ(wave32, parseDevicePreset("amd-rdna3")) << "as amd-rdna3 but for the subgroup size";

  const DeviceInfo arc = parseDevicePreset("intel-arc");
  EXPECT_EQ(arc.vendor, Vendor::Intel);
  EXPECT_EQ(arc.subgroupSize, 32u);
  EXPECT_EQ(arc.minSubgroupSize, 8u);
  EXPECT_EQ(arc.maxSubgroupSize, 32u);
  EXPECT_TRUE(arc.subgroupSizeControl);
  EXPECT_EQ(arc.maxSharedMemoryBytes, 65536u);
  EXPECT_TRUE(arc.coopMatShapes.empty());
  EXPECT_EQ(arc.computeUnits, 32u);
  EXPECT_EQ(arc.deviceMemoryBytes, 16ull << 30);

  const DeviceInfo apple = parseDevicePreset("apple-m");
  EXPECT_EQ(apple.vendor, Vendor::Apple);
  EXPECT_EQ(apple.subgroupSize, 32u);
  EXPECT_EQ(apple.maxSharedMemoryBytes, 32768u);
  EXPECT_TRUE(apple.coopMatShapes.empty());
  EXPECT_TRUE(apple.fp16Arithmetic);
  EXPECT_EQ(apple.maxWorkgroupInvocations, 1024u);
  EXPECT_EQ(apple.computeUnits, 38u);
  EXPECT_EQ(apple.deviceMemoryBytes, 32ull << 30);
}

TEST(DeviceInfo, EveryPresetHasItsFamily) {
  const std::map<std::string, DeviceFamily> want = {
      {"h200", DeviceFamily::Hopper},      {"h100", DeviceFamily::Hopper},
      {"ada", DeviceFamily::Ada},          {"lavapipe", DeviceFamily::Lavapipe},
      {"small", DeviceFamily::Other},      {"amd-rdna3", DeviceFamily::Rdna3},
      {"amd-rdna3-wave32", DeviceFamily::Rdna3}, {"intel-arc", DeviceFamily::Arc},
      {"apple-m", DeviceFamily::Apple}};
  for (const auto& name : devicePresetNames()) {
    ASSERT_TRUE(want.count(name)) << name << " is a preset this test does not know";
    EXPECT_EQ(parseDevicePreset(name).family, want.at(name)) << name;
  }
  EXPECT_EQ(devicePresetNames().size(), want.size());
}

TEST(DeviceInfo, TheFamilyFollowsWhatTheDriverReports) {
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA H100 80GB HBM3"), DeviceFamily::Hopper);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA H200"), DeviceFamily::Hopper);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA GH200 480GB"), DeviceFamily::Hopper);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA GeForce RTX 4090"), DeviceFamily::Ada);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA GeForce RTX 4060 Laptop GPU"), DeviceFamily::Ada);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA L40S"), DeviceFamily::Ada);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA L4"), DeviceFamily::Ada);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA RTX 6000 Ada Generation"), DeviceFamily::Ada);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA GeForce RTX 3090"), DeviceFamily::Other);
  EXPECT_EQ(deviceFamilyFor(Vendor::Nvidia, "NVIDIA A100-SXM4-80GB"), DeviceFamily::Other);
  EXPECT_EQ(deviceFamilyFor(Vendor::Amd, "AMD Radeon RX 7900 XTX (RADV NAVI31)"), DeviceFamily::Rdna3);
  EXPECT_EQ(deviceFamilyFor(Vendor::Amd, "AMD Radeon Graphics (RADV GFX1103_R1)"), DeviceFamily::Rdna3);
  EXPECT_EQ(deviceFamilyFor(Vendor::Amd, "AMD Radeon PRO W7900"), DeviceFamily::Rdna3);
  EXPECT_EQ(deviceFamilyFor(Vendor::Amd, "AMD Radeon RX 6800 XT (RADV NAVI21)"), DeviceFamily::Other);
  EXPECT_EQ(deviceFamilyFor(Vendor::Intel, "Intel(R) Arc(tm) A770 Graphics (DG2)"), DeviceFamily::Arc);
  EXPECT_EQ(deviceFamilyFor(Vendor::Intel, "Intel(R) UHD Graphics 770 (ADL-S GT1)"), DeviceFamily::Other);
  EXPECT_EQ(deviceFamilyFor(Vendor::Apple, "Apple M2 Max"), DeviceFamily::Apple);
  EXPECT_EQ(deviceFamilyFor(Vendor::Mesa, "llvmpipe (LLVM 15.0.6, 256 bits)"), DeviceFamily::Lavapipe);
  EXPECT_EQ(deviceFamilyFor(Vendor::Other, "some GPU"), DeviceFamily::Other);
}

TEST(DeviceInfo, OverridesApplyOnTopOfAPreset) {
  const DeviceInfo d = parseDevicePreset("h200,subgroup=64,shared=32768,coopmat=0,cus=8");
  EXPECT_EQ(d.subgroupSize, 64u);
  EXPECT_EQ(d.minSubgroupSize, 64u);
  EXPECT_EQ(d.maxSubgroupSize, 64u);
  EXPECT_EQ(d.maxSharedMemoryBytes, 32768u);
  EXPECT_TRUE(d.coopMatShapes.empty());
  EXPECT_FALSE(d.coopMatLayout.quad());
  EXPECT_EQ(d.computeUnits, 8u);
  EXPECT_FALSE(parseDevicePreset("h200,quad=0").coopMatLayout.quad());
  EXPECT_TRUE(parseDevicePreset("lavapipe,coopmat=1").coopMatLayout.quad());
  EXPECT_FALSE(parseDevicePreset("lavapipe,quad=1").coopMatLayout.quad()) << "no shapes, no layout";
  EXPECT_FALSE(parseDevicePreset("h200,fp16=0").fp16Arithmetic);
  EXPECT_EQ(parseDevicePreset("lavapipe,storage=200000000").maxStorageBufferRange, 200000000u);
  EXPECT_EQ(parseDevicePreset("custom"), DeviceInfo{});
}

/// Every preset, and presets with overrides, and a device whose text fields need quoting.
std::vector<DeviceInfo> roundTripCases() {
  std::vector<DeviceInfo> out;
  for (const auto& name : devicePresetNames()) out.push_back(parseDevicePreset(name));
  for (const char* text : {"h200,subgroup=64,shared=32768,coopmat=0,cus=8", "lavapipe,coopmat=1,fp16=0",
                           "h200,quad=0", "amd-rdna3,subgroup-min=16,storage=234567890", "small,coopmat=16x8x8:f16:f16"}) {
    out.push_back(parseDevicePreset(text));
  }
  DeviceInfo odd = parseDevicePreset("intel-arc");
  odd.name = "llvmpipe (LLVM 15.0.7, 256 bits) \"quoted\" \\ a=b, c";
  odd.driverName = "";
  odd.kind = DeviceKind::Virtual;
  odd.vendor = Vendor::Qualcomm;
  odd.subgroupArithmetic = odd.subgroupShuffle = odd.subgroupVote = odd.storage16Bit = false;
  odd.coopMatShapes = {{16, 16, 16, DType::F16, DType::F16}, {8, 8, 32, DType::F32, DType::F32}};
  odd.coopMatLayout = {{0, 8, 3}, {1}};
  for (std::size_t i = 0; i < odd.uuid.size(); ++i) odd.uuid[i] = static_cast<std::uint8_t>(i * 17);
  odd.driverVersion = 0xdeadbeef;
  odd.maxAllocationBytes = ~0ull;
  out.push_back(odd);
  return out;
}

TEST(DeviceInfo, TheStringFormReadsBackToAnEqualDevice) {
  for (const DeviceInfo& d : roundTripCases()) {
    const std::string text = d.toString();
    SCOPED_TRACE(text);
    EXPECT_THAT(text, ::testing::StartsWith("custom,name=\""));
    EXPECT_EQ(parseDevicePreset(text), d);
    EXPECT_EQ(parseDevicePreset(text).toString(), text);
  }
}

TEST(DeviceInfo, EqualitySeesEveryField) {
  const DeviceInfo h200 = parseDevicePreset("h200");
  EXPECT_EQ(h200, parseDevicePreset("h200"));
  EXPECT_NE(h200, parseDevicePreset("h100"));
  DeviceInfo other = h200;
  other.uuid[15] = 1;
  EXPECT_NE(h200, other);
  other = h200;
  other.family = DeviceFamily::Ada;
  EXPECT_NE(h200, other);
  other = h200;
  other.coopMatLayout.colOf.back() = 0;
  EXPECT_NE(h200, other);
}

/// The UserError `text` raises; its message must name every fragment.
void expectRejected(const std::string& text, std::initializer_list<const char*> fragments) {
  try {
    parseDevicePreset(text);
    ADD_FAILURE() << text << " was accepted";
  } catch (const UserError& e) {
    for (const char* f : fragments) EXPECT_THAT(e.what(), HasSubstr(f)) << text;
  }
}

TEST(DeviceInfo, BadPresetsAndKeysNameWhatIsAccepted) {
  expectRejected("b200", {"b200", "h200", "lavapipe", "apple-m", "custom"});
  expectRejected("h200,warp=32", {"warp", "subgroup", "shared", "coopmat", "uuid"});
  expectRejected("h200,subgroup=24", {"subgroup=24", "power of two"});
  expectRejected("h200,subgroup", {"subgroup", "key=value"});
  expectRejected("h200,subgroup=x", {"subgroup='x'", "integer"});
  expectRejected("h200,shared=99999999999", {"shared=", "4294967295"});
  expectRejected("h200,vendor=nvidea", {"vendor='nvidea'", "nvidia", "amd", "apple"});
  expectRejected("h200,kind=gpu", {"kind='gpu'", "discrete", "cpu"});
  expectRejected("h200,family=blackwell", {"family='blackwell'", "hopper", "rdna3", "lavapipe"});
  expectRejected("h200,fp16=yes", {"fp16='yes'", "0, 1"});
  expectRejected("h200,coopmat=16x16:f16:f32", {"coopmat=", "MxNxK:input:accumulator"});
  expectRejected("h200,coopmat=16x16x16:f16:f64", {"coopmat=", "MxNxK"});
  expectRejected("h200,layout=quad", {"layout='quad'", "nvidia-quad"});
  expectRejected("h200,layout=0.300/1", {"layout=", "255"});
  expectRejected("h200,uuid=1234", {"uuid='1234'", "32 hex digits"});
  expectRejected("h200,name=\"unclosed", {"never closed"});
  expectRejected("amd-rdna3,subgroup-max=32", {"subgroup=64", "subgroup-max=32"});
  // Limits below what Vulkan requires of every device describe none.
  expectRejected("lavapipe,invocations=0", {"invocations='0'", "at least 128"});
  expectRejected("custom,subgroup=256,invocations=128", {"invocations='128'", "at least subgroup-max=256"});
  expectRejected("lavapipe,shared=0", {"shared='0'", "at least 16384"});
  expectRejected("h200,push=64", {"push='64'", "at least 128"});
  expectRejected("h200,storage=12345", {"storage='12345'", "at least 134217728"});
  expectRejected("lavapipe,alloc=0", {"alloc='0'", "at least 1073741824"});
  expectRejected("h200,cus=0", {"cus='0'", "at least 1"});
  expectRejected("h200,workgroup-size=1024x1024", {"workgroup-size='1024x1024'", "XxYxZ"});
  expectRejected("h200,workgroup-size=1024x1024x64x1", {"workgroup-size='1024x1024x64x1'", "XxYxZ"});
  expectRejected("h200,workgroup-size=1024x1024x32", {"workgroup-size='1024x1024x32'", "at least 128x128x64"});
  EXPECT_EQ(parseDevicePreset("h200,workgroup-size=1024x512x64").maxWorkgroupSize,
            (std::array<std::uint32_t, 3>{1024, 512, 64}));
}

TEST(CoopMatLayout, TheQuadPatternIsRecognisedAndAnythingElseRejected) {
  const CoopMatLayout nv = nvidiaQuadLayout();
  CoopMatProbeResult probe;
  probe.subgroupSize = 32;
  probe.elements = 8;
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    for (std::uint32_t e = 0; e < 8; ++e) {
      probe.flat.push_back((nv.rowOf[e] + lane / 4) * 16 + nv.colOf[e] + 2 * (lane % 4));
    }
  }
  EXPECT_EQ(quadLayoutFrom(probe), nv);
  CoopMatProbeResult swapped = probe;
  std::swap(swapped.flat[5 * 8 + 2], swapped.flat[6 * 8 + 2]);  // two lanes disagree with the pattern
  EXPECT_FALSE(quadLayoutFrom(swapped).quad());
  CoopMatProbeResult empty = probe;
  empty.elements = 0;
  empty.flat.clear();
  EXPECT_FALSE(quadLayoutFrom(empty).quad());
  // 16x8 accumulators, as the H200's driver (580.159.04) lays them out; it orders the 16x16 ones row
  // half first (0.0.0.0.8.8.8.8/0.1.8.9.0.1.8.9), which is a quad layout too.
  const CoopMatLayout h200 = {{0, 0, 0, 0, 8, 8, 8, 8}, {0, 1, 8, 9, 0, 1, 8, 9}}, nv8 = nvidiaQuadLayout8();
  probe.flat.clear();
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    for (std::uint32_t e = 0; e < 8; ++e) {
      probe.flat.push_back((h200.rowOf[e] + lane / 4) * 16 + h200.colOf[e] + 2 * (lane % 4));
    }
    for (std::uint32_t e = 0; e < 4; ++e) probe.flat8.push_back((nv8.rowOf[e] + lane / 4) * 8 + nv8.colOf[e] + 2 * (lane % 4));
  }
  probe.elements8 = 4;
  EXPECT_EQ(quadLayoutFrom(probe), h200);
  EXPECT_EQ(quadLayoutFrom(probe, 8), nv8);
  EXPECT_FALSE(quadLayoutFrom(empty, 8).quad());
  std::swap(probe.flat8[3 * 4 + 1], probe.flat8[3 * 4 + 2]);
  EXPECT_FALSE(quadLayoutFrom(probe, 8).quad());
  // Both round-trip through the device string.
  DeviceInfo d = parseDevicePreset("h200");
  EXPECT_EQ(d.coopMatLayout8, nv8);
  d.coopMatLayout = h200;
  d.coopMatLayout8 = {{8, 8, 0, 0}, {0, 1, 0, 1}};
  const DeviceInfo back = parseDevicePreset(d.toString());
  EXPECT_EQ(back.coopMatLayout, h200);
  EXPECT_EQ(back.coopMatLayout8, d.coopMatLayout8);
  EXPECT_FALSE(parseDevicePreset("h200,coopmat=0").coopMatLayout8.quad());
  // 16x16 f16 matrices, as the H200's driver orders them (row half first, as its f32 16x16 ones).
  const CoopMatLayout f16 = nvidiaQuadLayoutF16();
  EXPECT_EQ(f16, h200);
  EXPECT_FALSE(quadLayoutFrom(probe, 16, true).quad());  // no f16 readout
  probe.elementsF16 = 8;
  for (std::uint32_t lane = 0; lane < 32; ++lane) {
    for (std::uint32_t e = 0; e < 8; ++e) {
      probe.flatF16.push_back((f16.rowOf[e] + lane / 4) * 16 + f16.colOf[e] + 2 * (lane % 4));
    }
  }
  EXPECT_EQ(quadLayoutFrom(probe, 16, true), f16);
  std::swap(probe.flatF16[7 * 8 + 0], probe.flatF16[7 * 8 + 1]);
  EXPECT_FALSE(quadLayoutFrom(probe, 16, true).quad());
  EXPECT_EQ(d.coopMatLayoutF16, f16);
  d.coopMatLayoutF16 = nvidiaQuadLayout();
  EXPECT_EQ(parseDevicePreset(d.toString()).coopMatLayoutF16, nvidiaQuadLayout());
  EXPECT_EQ(parseDevicePreset("h200,layouth=none").coopMatLayoutF16, CoopMatLayout{});
  EXPECT_FALSE(parseDevicePreset("h200,coopmat=0").coopMatLayoutF16.quad());
}

}  // namespace
}  // namespace foundry
