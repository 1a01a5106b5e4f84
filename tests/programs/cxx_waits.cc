// cxx_waits: C++ std::condition_variable and std::mutex waits, with their culprits.
//
// Phase 1 (condition variable): a producer fabricates each item for produce_ms
// (`plant::fabricate`), then `plant::Station::deliver(int)` pushes it and calls notify_one;
// two consumers wait in `plant::Station::collect()` (std::condition_variable::wait) and sleep
// CONSUME_US per item. Their waiting must be blamed on `deliver`.
// Phase 2 (mutex): `plant::Ledger::audit()` holds the ledger's std::mutex for hold_ms of
// computing, then computes GAP outside it; two posters call `plant::Ledger::post(long)`, a
// very short hold, then sleep POST_GAP_US. Their lock waiting must be blamed on `audit`.
//
// Usage: cxx_waits [seconds_per_phase=0.6] [produce_ms=4] [hold_ms=4]
//
// Ground truth (steady_clock = CLOCK_MONOTONIC): phase 1: every cv.wait call [called,
// returned] is a wait, every notify a wake event just before the call; blame of deliver =
// the waiting up to each of its notifies since the previous one. Phase 2: every lock call
// [called, returned] and every hold [returned, unlock]; blame of audit = overlap of the
// posters' waits with audit's holds. Prints
//   truth wait_collect_ns=.. blame_deliver_ns=.. wait_post_ns=.. blame_audit_ns=..
//         items=.. audits=.. posts=.. wall_ns=..
#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <deque>
#include <mutex>
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

} // namespace

namespace plant {

constexpr uint64_t CONSUME_US = 300;
constexpr uint64_t POST_GAP_US = 150;
constexpr uint64_t AUDIT_GAP_NS = 1000000;

NOINL void fabricate(unsigned i, uint64_t ns) { busy_for(ns, i); }

class Station {
  public:
    Station(size_t cap) : waits(2) {
        events.reserve(cap);
        for (auto &v : waits)
            v.reserve(cap);
    }

    // Pushes one item and wakes a consumer; the notify's time is a wake event.
    NOINL void deliver(int item) {
        std::lock_guard<std::mutex> lk(m_);
        q_.push_back(item);
        events.push_back(now_ns());
        cv_.notify_one();
    }

    NOINL void close() {
        std::lock_guard<std::mutex> lk(m_);
        closed_ = true;
        events.push_back(now_ns());
        cv_.notify_all();
    }

    // Takes one item (false once closed and empty); logs each cv.wait call of `consumer`.
    NOINL bool collect(int consumer) {
        std::unique_lock<std::mutex> lk(m_);
        while (q_.empty() && !closed_) {
            uint64_t a = now_ns();
            cv_.wait(lk);
            waits[consumer].push_back({a, now_ns()});
        }
        if (q_.empty())
            return false;
        q_.pop_front();
        taken_++;
        return true;
    }

    long taken() const { return taken_; }

    std::vector<uint64_t> events;              // notify times, in order
    std::vector<std::vector<Interval>> waits; // per consumer

  private:
    std::mutex m_;
    std::condition_variable cv_;
    std::deque<int> q_;
    bool closed_ = false;
    long taken_ = 0;
};

class Ledger {
  public:
    Ledger(size_t cap, uint64_t hold_ns) : waits(2), hold_ns_(hold_ns) {
        holds.reserve(cap);
        for (auto &v : waits)
            v.reserve(cap);
    }

    // One long hold: computing under the lock.
    NOINL void audit(unsigned i) {
        std::lock_guard<std::mutex> lk(m_);
        uint64_t h0 = now_ns();
        busy_for(hold_ns_, i);
        balance_ += 1;
        holds.push_back({h0, now_ns()});
    }

    // A short hold; logs the wait of poster `who` for the lock.
    NOINL long post(long amount, int who) {
        uint64_t a = now_ns();
        std::lock_guard<std::mutex> lk(m_);
        waits[who].push_back({a, now_ns()});
        balance_ += amount;
        return balance_;
    }

    std::vector<Interval> holds;              // audit's holds, in order
    std::vector<std::vector<Interval>> waits; // per poster

  private:
    uint64_t hold_ns_;
    std::mutex m_;
    long balance_ = 0;
};

} // namespace plant

static uint64_t overlap(const Interval &h, const Interval &w) {
    uint64_t s = std::max(h.a, w.a), e = std::min(h.b, w.b);
    return e > s ? e - s : 0;
}

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.6;
    double pms = argc > 2 ? atof(argv[2]) : 4.0;
    double hms = argc > 3 ? atof(argv[3]) : 4.0;
    if (secs <= 0 || pms <= 0 || hms <= 0) {
        fprintf(stderr, "usage: cxx_waits [seconds_per_phase] [produce_ms] [hold_ms]\n");
        return 2;
    }
    const uint64_t produce_ns = (uint64_t)(pms * 1e6), hold_ns = (uint64_t)(hms * 1e6);
    const size_t cap = (size_t)(secs * 1e9 / 100000.0) + 1000;
    uint64_t t0 = now_ns();

    // Phase 1: condition variable.
    plant::Station station(cap);
    std::vector<std::thread> consumers;
    for (int c = 0; c < 2; c++)
        consumers.emplace_back([&station, c] {
            while (station.collect(c))
                std::this_thread::sleep_for(std::chrono::microseconds(plant::CONSUME_US));
        });
    uint64_t end1 = now_ns() + (uint64_t)(secs * 1e9);
    int items = 0;
    while (now_ns() < end1) {
        plant::fabricate((unsigned)items, produce_ns);
        station.deliver(items);
        items++;
    }
    size_t deliver_events = station.events.size(); // the close() event comes after
    station.close();
    for (auto &t : consumers)
        t.join();

    // Phase 2: mutex.
    plant::Ledger ledger(cap, hold_ns);
    uint64_t end2 = now_ns() + (uint64_t)(secs * 1e9);
    std::thread auditor([&] {
        for (unsigned i = 0; now_ns() < end2; i++) {
            ledger.audit(i);
            busy_for(plant::AUDIT_GAP_NS, i);
        }
    });
    std::vector<std::thread> posters;
    for (int p = 0; p < 2; p++)
        posters.emplace_back([&ledger, end2, p] {
            long s = 0;
            while (now_ns() < end2) {
                s += ledger.post(1, p);
                std::this_thread::sleep_for(std::chrono::microseconds(plant::POST_GAP_US));
            }
            sink[p] = (uint64_t)s;
        });
    auditor.join();
    for (auto &t : posters)
        t.join();
    uint64_t wall = now_ns() - t0;

    if (station.taken() != items) {
        fprintf(stderr, "cxx_waits: delivered %d, collected %ld\n", items, station.taken());
        return 1;
    }
    // Phase 1 truth: each wait's part in (previous event, event] goes to that event.
    const std::vector<uint64_t> &events = station.events;
    uint64_t wait_collect = 0, blame_deliver = 0;
    for (auto &v : station.waits)
        for (const Interval &w : v) {
            wait_collect += w.b - w.a;
            uint64_t from = w.a;
            auto it = std::upper_bound(events.begin(), events.end(), w.a);
            for (; it != events.end() && *it <= w.b; ++it) {
                if ((size_t)(it - events.begin()) < deliver_events)
                    blame_deliver += *it - from;
                from = *it;
            }
        }
    // Phase 2 truth: overlap of the posters' waits with audit's holds.
    const std::vector<Interval> &holds = ledger.holds;
    uint64_t wait_post = 0, blame_audit = 0;
    size_t nposts = 0;
    for (auto &v : ledger.waits)
        for (const Interval &w : v) {
            wait_post += w.b - w.a;
            nposts++;
            auto it = std::lower_bound(holds.begin(), holds.end(), w.a,
                                       [](const Interval &h, uint64_t t) { return h.b <= t; });
            for (; it != holds.end() && it->a < w.b; ++it)
                blame_audit += overlap(*it, w);
        }
    printf("cxx_waits: %.2f s; phase 1: %d items, consumers waited %.3f s; phase 2: %zu audits,"
           " %zu posts waited %.3f s\n",
           wall / 1e9, items, wait_collect / 1e9, holds.size(), nposts, wait_post / 1e9);
    printf("truth wait_collect_ns=%llu blame_deliver_ns=%llu wait_post_ns=%llu"
           " blame_audit_ns=%llu items=%d audits=%zu posts=%zu wall_ns=%llu\n",
           (unsigned long long)wait_collect, (unsigned long long)blame_deliver,
           (unsigned long long)wait_post, (unsigned long long)blame_audit, items, holds.size(),
           nposts, (unsigned long long)wall);
    return 0;
}
