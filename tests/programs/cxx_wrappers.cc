// cxx_wrappers: waits through C++'s own lock types, whose inlined wrappers
// (__glibcxx_rwlock_rdlock, std::shared_lock, std::condition_variable::wait<Pred>) stand
// between the user's functions and pthread: the profiler must name the user's functions.
//
// Phase 1 (std::shared_mutex): `update_table` holds the table exclusively (std::unique_lock)
// for hold_ms of computing, then computes as long outside it; two readers call `read_table`
// (std::shared_lock, a short read) in a loop with a short sleep. Readers wait only while
// update_table holds the lock (glibc's rwlock prefers readers), so their waiting must be
// blamed on `update_table`.
// Phase 2 (std::condition_variable): `produce` computes produce_ms per item, pushes it and
// notifies; a consumer waits in `consume` (cv.wait with a predicate lambda). Its waiting
// must be blamed on `produce`.
//
// Usage: cxx_wrappers [seconds_per_phase=0.6] [hold_ms=4] [produce_ms=4]
//
// Ground truth (steady_clock = CLOCK_MONOTONIC): phase 1: every reader's lock call [called,
// returned] is a wait, every update_table hold [returned, unlock called] a hold; blame of
// update_table = overlap of the readers' waits with its holds. Phase 2: every cv.wait call
// of consume [called, returned]. Prints
//   truth wait_read_ns=.. blame_update_ns=.. wait_consume_ns=.. reads=.. updates=.. items=..
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
#include <shared_mutex>
#include <thread>
#include <vector>

#define NOINL __attribute__((noinline, noclone))

namespace {

using Clock = std::chrono::steady_clock;

uint64_t now_ns() {
    return (uint64_t)std::chrono::duration_cast<std::chrono::nanoseconds>(
               Clock::now().time_since_epoch())
        .count();
}

volatile uint64_t sink[256];

NOINL void busy_for(uint64_t ns, unsigned seed) {
    uint64_t end = now_ns() + ns;
    unsigned x = seed | 1;
    do {
        for (int i = 0; i < 64; i++) {
            x = x * 1103515245u + 12345u;
            sink[x & 255] += x;
        }
    } while (now_ns() < end);
}

struct Interval {
    uint64_t a, b;
};

uint64_t overlap(const std::vector<Interval> &waits, const std::vector<Interval> &holds) {
    uint64_t sum = 0;
    for (const auto &w : waits)
        for (const auto &h : holds) {
            uint64_t a = w.a > h.a ? w.a : h.a, b = w.b < h.b ? w.b : h.b;
            if (b > a)
                sum += b - a;
        }
    return sum;
}

std::shared_mutex table_lock;
int table[64];
std::vector<Interval> reads[2]; // per reader: its lock calls
std::vector<Interval> holds;    // update_table's holds
uint64_t hold_ns, produce_ns;

std::mutex queue_lock;
std::condition_variable queue_cv;
std::deque<int> queue;
bool closed = false;
std::vector<Interval> consumer_waits;

} // namespace

// The user's functions, with plain names (as a report shows them: `read_table(int, int)`).

// A short read under the shared lock; logs the lock call.
NOINL int read_table(int reader, int i) {
    uint64_t a = now_ns();
    std::shared_lock<std::shared_mutex> lk(table_lock);
    reads[reader].push_back({a, now_ns()});
    return table[i & 63];
}

// A long exclusive hold, logged from the lock's return to the unlock.
NOINL void update_table(int round) {
    std::unique_lock<std::shared_mutex> lk(table_lock);
    uint64_t a = now_ns();
    busy_for(hold_ns, round);
    table[round & 63] = round;
    holds.push_back({a, now_ns()});
}

// Waits for an item with a predicate; logs each wait call.
NOINL bool consume() {
    std::unique_lock<std::mutex> lk(queue_lock);
    uint64_t a = now_ns();
    queue_cv.wait(lk, [] { return !queue.empty() || closed; });
    consumer_waits.push_back({a, now_ns()});
    if (queue.empty())
        return false;
    queue.pop_front();
    return true;
}

NOINL void produce(int item) {
    busy_for(produce_ns, item);
    {
        std::lock_guard<std::mutex> lk(queue_lock);
        queue.push_back(item);
    }
    queue_cv.notify_one();
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.6;
    hold_ns = (uint64_t)((argc > 2 ? atof(argv[2]) : 4) * 1e6);
    produce_ns = (uint64_t)((argc > 3 ? atof(argv[3]) : 4) * 1e6);
    uint64_t phase_ns = (uint64_t)(secs * 1e9);

    // Phase 1: readers behind an exclusive holder.
    std::atomic<bool> stop{false};
    std::vector<std::thread> readers;
    for (int r = 0; r < 2; r++)
        readers.emplace_back([&, r] {
            int i = 0;
            while (!stop.load()) {
                read_table(r, i++);
                std::this_thread::sleep_for(std::chrono::microseconds(200));
            }
        });
    uint64_t end = now_ns() + phase_ns;
    int updates = 0;
    while (now_ns() < end) {
        update_table(updates++);
        busy_for(hold_ns, updates);
    }
    stop = true;
    for (auto &t : readers)
        t.join();
    uint64_t wait_read = 0, blame_update = 0;
    size_t n_reads = 0;
    for (const auto &w : reads) {
        for (const auto &i : w)
            wait_read += i.b - i.a;
        blame_update += overlap(w, holds);
        n_reads += w.size();
    }

    // Phase 2: a consumer waiting for a producer.
    std::thread consumer([] {
        while (consume()) {
        }
    });
    end = now_ns() + phase_ns;
    int items = 0;
    while (now_ns() < end)
        produce(items++);
    {
        std::lock_guard<std::mutex> lk(queue_lock);
        closed = true;
    }
    queue_cv.notify_one();
    consumer.join();
    uint64_t wait_consume = 0;
    for (const auto &i : consumer_waits)
        wait_consume += i.b - i.a;

    printf("truth wait_read_ns=%llu blame_update_ns=%llu wait_consume_ns=%llu reads=%zu "
           "updates=%d items=%d\n",
           (unsigned long long)wait_read, (unsigned long long)blame_update,
           (unsigned long long)wait_consume, n_reads, updates, items);
    return 0;
}
