// cxx_guard: a table under one std::mutex, taken through the program's own RAII guard class
// (`TableGuard`, whose constructor locks and destructor unlocks, out of line, as a guard
// defined in its own source file is), from two functions: `lookup` (three threads, 20 us
// under the lock, 40 us between) and `insert` (one thread, 5 ms under the lock every 20 ms).
// The guard only forwards to the lock from both: the profiler must name the waiters and
// holders by the functions that use it, `lookup -> TableGuard::TableGuard(...)`, not by
// the guard alone, which would merge them.
//
// Usage: cxx_guard [seconds=1.5]
//
// Ground truth (steady_clock = CLOCK_MONOTONIC): each guard's wait for the mutex [lock
// called, returned], summed per function that made the guard. Prints
//   truth idle_lookup_ns=.. idle_insert_ns=.. lookups=.. inserts=..
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace {

uint64_t now_ns() {
    return std::chrono::duration_cast<std::chrono::nanoseconds>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

std::atomic<uint64_t> sink;

__attribute__((noinline)) void compute_for(uint64_t ns) {
    uint64_t end = now_ns() + ns;
    uint64_t x = 1;
    do {
        for (int i = 0; i < 64; i++)
            x = x * 6364136223846793005ull + 1442695040888963407ull;
    } while (now_ns() < end);
    sink += x;
}

std::mutex table_mutex;
std::atomic<uint64_t> idle[2];
std::atomic<bool> stop;

enum Caller { LOOKUP, INSERT };

// The program's own guard: it measures its wait for the caller, and holds the mutex for
// its lifetime.
class TableGuard {
  public:
    __attribute__((noinline)) explicit TableGuard(Caller caller) {
        uint64_t a = now_ns();
        table_mutex.lock();
        idle[caller] += now_ns() - a;
    }
    __attribute__((noinline)) ~TableGuard() { table_mutex.unlock(); }
    TableGuard(const TableGuard &) = delete;
    TableGuard &operator=(const TableGuard &) = delete;
};

__attribute__((noinline)) void lookup() {
    TableGuard guard(LOOKUP);
    compute_for(20000);
}

__attribute__((noinline)) void insert() {
    TableGuard guard(INSERT);
    compute_for(5000000);
}

} // namespace

int main(int argc, char **argv) {
    double secs = argc > 1 ? std::atof(argv[1]) : 1.5;
    if (secs <= 0) {
        std::fprintf(stderr, "usage: cxx_guard [seconds]\n");
        return 2;
    }
    uint64_t deadline = now_ns() + static_cast<uint64_t>(secs * 1e9);
    std::atomic<long> lookups{0}, inserts{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 3; t++)
        threads.emplace_back([&] {
            while (now_ns() < deadline) {
                lookup();
                lookups++;
                compute_for(40000);
            }
        });
    threads.emplace_back([&] {
        while (now_ns() < deadline) {
            insert();
            inserts++;
            compute_for(15000000);
        }
    });
    for (auto &t : threads)
        t.join();
    std::printf("cxx_guard: %ld lookups, %ld inserts; lookups waited %.3f s, inserts %.3f s\n",
                lookups.load(), inserts.load(), idle[LOOKUP] / 1e9, idle[INSERT] / 1e9);
    std::printf("truth idle_lookup_ns=%llu idle_insert_ns=%llu lookups=%ld inserts=%ld\n",
                static_cast<unsigned long long>(idle[LOOKUP].load()),
                static_cast<unsigned long long>(idle[INSERT].load()), lookups.load(),
                inserts.load());
    return 0;
}
