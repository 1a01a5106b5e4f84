// shapes: a C++ workload with namespaces, a class, a template and std::thread, to check
// demangled names and call paths through libstdc++'s thread start-up.
// usage: shapes [CPU_SECONDS_PER_THREAD=0.6]
// stdout: "truth smooth_ns=N"
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <thread>
#include <vector>

static unsigned long long cpu_ns() {
    timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec * 1000000000ULL + ts.tv_nsec;
}

namespace geom {
template <typename T> struct Accumulator {
    __attribute__((noinline)) T add_all(int n) {
        volatile T x = 0;
        for (int i = 0; i < n; i++) x += T(i) * T(0.5);
        return x;
    }
};

class Mesh {
  public:
    __attribute__((noinline)) unsigned long long smooth(double secs) {
        Accumulator<double> acc;
        unsigned long long start = cpu_ns(), end = start + (unsigned long long)(secs * 1e9);
        while (cpu_ns() < end) acc.add_all(10000);
        return cpu_ns() - start;
    }
};
} // namespace geom

int main(int argc, char **argv) {
    double secs = argc > 1 ? atof(argv[1]) : 0.6;
    std::atomic<unsigned long long> total{0};
    std::vector<std::thread> threads;
    for (int i = 0; i < 2; i++)
        threads.emplace_back([&] { total += geom::Mesh().smooth(secs); });
    for (auto &t : threads) t.join();
    std::printf("truth smooth_ns=%llu\n", total.load());
    return 0;
}
