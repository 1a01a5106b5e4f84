// C++ exceptions thrown and caught on several threads while they lock, under profiling: the
// program's own unwinder (libgcc_s via libstdc++) must be the one that runs them, whatever
// the runtime links in. Prints how many exceptions each thread caught and a checksum that
// depends on every catch; exits 0 only if every throw was caught where it should be.
//
// usage: cxx_exceptions [threads] [throws per thread]
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

static std::mutex lock;
static unsigned long shared_sum;

struct Depth : std::runtime_error {
    int depth;
    Depth(int d) : std::runtime_error("depth " + std::to_string(d)), depth(d) {}
};

__attribute__((noinline)) static int dive(int depth, int limit) {
    volatile double x = depth;
    for (int i = 0; i < 2000; i++) x = x * 1.0000001 + 1.0;
    if (depth == limit) throw Depth(depth);
    return dive(depth + 1, limit) + (int)x;
}

static void worker(int id, int throws, unsigned long *caught) {
    for (int i = 0; i < throws; i++) {
        try {
            std::lock_guard<std::mutex> g(lock);  // unlocked by the unwinding
            dive(0, 1 + (id + i) % 7);
            std::abort();  // dive always throws
        } catch (const Depth &e) {
            (*caught)++;
            std::lock_guard<std::mutex> g(lock);
            shared_sum += (unsigned long)e.depth * (id + 1) + i;
        }
    }
}

int main(int argc, char **argv) {
    int threads = argc > 1 ? atoi(argv[1]) : 4;
    int throws = argc > 2 ? atoi(argv[2]) : 20000;
    std::vector<unsigned long> caught(threads);
    std::vector<std::thread> pool;
    for (int t = 0; t < threads; t++) pool.emplace_back(worker, t, throws, &caught[t]);
    for (auto &t : pool) t.join();
    unsigned long expected = 0, total = 0;
    for (int t = 0; t < threads; t++)
        for (int i = 0; i < throws; i++)
            expected += (unsigned long)(1 + (t + i) % 7) * (t + 1) + i;
    for (int t = 0; t < threads; t++) {
        printf("thread %d caught %lu\n", t, caught[t]);
        total += caught[t];
    }
    printf("sum %lu\n", shared_sum);
    return total == (unsigned long)threads * throws && shared_sum == expected ? 0 : 1;
}
