// tier4_gtest.cpp — the GoogleTest runner of test_library() (cmake/heaphook_tier4.cmake). The
// allocator under test is linked into this program with the heaphook core, so it serves every
// allocation of the process (gtest's included), as with tier4's test_library. Tests: the
// GlobalAllocator members called directly, as tier4-style tests do, and the whole conformance
// suite (test/native/conformance.c) as one test.
#include <gtest/gtest.h>
#include <stdint.h>

#include "heaphook/heaphook.hpp"

extern "C" int heaphook_conformance_main(int argc, char **argv);

namespace {

heaphook::GlobalAllocator &allocator() {
    return heaphook::GlobalAllocator::get_instance();
}

const size_t kSizes[] = {1, 15, 16, 17, 123, 4096, 74565, 1 << 20};

}  // namespace

TEST(GlobalAllocator, AllocWritesTheWholeBlockAndDeallocs) {
    for (size_t size : kSizes) {
        char *ptr = static_cast<char *>(allocator().alloc(size));
        ASSERT_NE(ptr, nullptr) << size;
        EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % HEAPHOOK_DEFAULT_ALIGNMENT, 0u) << size;
        size_t usable = allocator().get_block_size(ptr);
        EXPECT_GE(usable, size);
        memset(ptr, 'A', usable);
        allocator().dealloc(ptr);
    }
}

TEST(GlobalAllocator, AlignedAlloc) {
    for (size_t align : {size_t(32), size_t(64), size_t(4096)}) {
        for (size_t size : kSizes) {
            char *ptr = static_cast<char *>(allocator().alloc(size, align));
            ASSERT_NE(ptr, nullptr) << size << " " << align;
            EXPECT_EQ(reinterpret_cast<uintptr_t>(ptr) % align, 0u) << size << " " << align;
            EXPECT_GE(allocator().get_block_size(ptr), size);
            memset(ptr, 'B', size);
            allocator().dealloc(ptr);
        }
    }
}

TEST(GlobalAllocator, AllocZeroedAndRealloc) {
    unsigned char *ptr = static_cast<unsigned char *>(allocator().alloc_zeroed(1000));
    ASSERT_NE(ptr, nullptr);
    for (int i = 0; i < 1000; i++) ASSERT_EQ(ptr[i], 0) << i;
    memset(ptr, 7, 1000);
    ptr = static_cast<unsigned char *>(allocator().realloc(ptr, 100000));
    ASSERT_NE(ptr, nullptr);
    for (int i = 0; i < 1000; i++) ASSERT_EQ(ptr[i], 7) << i;
    allocator().dealloc(ptr);
}

TEST(Conformance, AllGroups) {
    char program[] = "heaphook_conformance";
    char backend[] = HEAPHOOK_CONFORMANCE_BACKEND;
    char *argv[] = {program, backend, nullptr};
    EXPECT_EQ(heaphook_conformance_main(2, argv), 0) << "see the FAIL lines above";
}

int main(int argc, char **argv) {
    testing::InitGoogleTest(&argc, argv);
    return RUN_ALL_TESTS();
}
