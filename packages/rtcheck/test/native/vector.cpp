// vector.cpp — a real-time section that grows a std::vector: every reallocation is an
// operator new and an operator delete.
//
//   rt_vector N
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "heaphook/rt.h"

__attribute__((noinline)) static long fill(std::vector<long> &v, long n) {
    for (long i = 0; i < n; i++) v.push_back(i);
    return (long)v.size();
}

int main(int argc, char **argv) {
    long n = argc > 1 ? std::atol(argv[1]) : 1000;
    long size;
    {
        heaphook::rt_scope rt;
        std::vector<long> v;
        size = fill(v, n);
    }
    std::printf("vector: %ld\n", size);
    return 0;
}
