// SPDX-License-Identifier: Apache-2.0
// Multi-thread target for `stackprov stack`: threads parked in distinct call chains and syscalls.
//
// Usage: fixture_threads [MODE]
//   all (default)  13 threads (main included) parked in nanosleep, read, pthread_cond_wait, poll,
//                  select, accept, sigwait, epoll_wait, a signal handler (normal stack and
//                  sigaltstack), a destructor run while an exception propagates, a recursion of
//                  depth 200, and pthread_join (main); prints "thread TID ROLE" per thread, then
//                  "ready" once every thread is asleep in the kernel.
//   bench [N]      N threads (default 16): main + N-1 nanosleep chains (the benchmark target).
//   churn          like all, plus threads that are created and exit continuously.
//   vfork          a thread calls vfork(); the child sleeps, so the parent thread stays in vfork.
//   exit-soon      like all, then exits ~N ms after "ready" (N from argv[2], default 30).
//   zombie-child   forks a child that exits at once and is never reaped; prints "child PID".
// Parked threads never wake up; the driver kills the process.
#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

// Keeps the compiler from turning calls into tail calls or folding chains.
#define KEEP() asm volatile("" ::: "memory")
#define NOINLINE __attribute__((noinline))

namespace {

std::atomic<int> g_parked{0};
int g_never_pipe[2];  // nobody ever writes to it
pthread_mutex_t g_print_mu = PTHREAD_MUTEX_INITIALIZER;

pid_t gettid_() { return static_cast<pid_t>(syscall(SYS_gettid)); }

void announce(const char* role) {
  pthread_mutex_lock(&g_print_mu);
  printf("thread %d %s\n", gettid_(), role);
  pthread_mutex_unlock(&g_print_mu);
  g_parked.fetch_add(1);
}

}  // namespace

// Chains are extern "C" with distinct names, so each thread is identifiable by its frames; the
// C++ chains (exceptions, recursion) keep mangled names to exercise demangling.
extern "C" {

NOINLINE void nanosleep_leaf(void) {
  announce("nanosleep");
  struct timespec ts = {100000, 0};
  while (true) nanosleep(&ts, nullptr);
}
NOINLINE void nanosleep_mid(void) { nanosleep_leaf(); KEEP(); }
NOINLINE void* nanosleep_main(void*) { nanosleep_mid(); KEEP(); return nullptr; }

NOINLINE void read_leaf(void) {
  announce("read");
  char c;
  while (true) (void)!read(g_never_pipe[0], &c, 1);
}
NOINLINE void read_mid(void) { read_leaf(); KEEP(); }
NOINLINE void* read_main(void*) { read_mid(); KEEP(); return nullptr; }

static pthread_mutex_t g_cv_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t g_cv = PTHREAD_COND_INITIALIZER;
NOINLINE void condwait_leaf(void) {
  pthread_mutex_lock(&g_cv_mu);
  announce("condwait");
  while (true) pthread_cond_wait(&g_cv, &g_cv_mu);
}
NOINLINE void condwait_mid(void) { condwait_leaf(); KEEP(); }
NOINLINE void* condwait_main(void*) { condwait_mid(); KEEP(); return nullptr; }

NOINLINE void poll_leaf(void) {
  announce("poll");
  struct pollfd p = {g_never_pipe[0], POLLIN, 0};
  while (true) poll(&p, 1, -1);
}
NOINLINE void poll_mid(void) { poll_leaf(); KEEP(); }
NOINLINE void* poll_main(void*) { poll_mid(); KEEP(); return nullptr; }

NOINLINE void select_leaf(void) {
  announce("select");
  while (true) {
    fd_set r;
    FD_ZERO(&r);
    FD_SET(g_never_pipe[0], &r);
    select(g_never_pipe[0] + 1, &r, nullptr, nullptr, nullptr);
  }
}
NOINLINE void select_mid(void) { select_leaf(); KEEP(); }
NOINLINE void* select_main(void*) { select_mid(); KEEP(); return nullptr; }

NOINLINE void accept_leaf(void) {
  int s = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un a;
  memset(&a, 0, sizeof(a));
  a.sun_family = AF_UNIX;
  // Abstract socket name (leading NUL), unique per process.
  snprintf(a.sun_path + 1, sizeof(a.sun_path) - 1, "stackprov-fixture-%d", getpid());
  if (bind(s, reinterpret_cast<struct sockaddr*>(&a), sizeof(a)) != 0 || listen(s, 1) != 0) {
    perror("fixture: bind/listen");
    exit(3);
  }
  announce("accept");
  while (true) accept(s, nullptr, nullptr);
}
NOINLINE void accept_mid(void) { accept_leaf(); KEEP(); }
NOINLINE void* accept_main(void*) { accept_mid(); KEEP(); return nullptr; }

NOINLINE void sigwait_leaf(void) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR2);
  announce("sigwait");
  int sig;
  while (true) sigwait(&s, &sig);
}
NOINLINE void sigwait_mid(void) { sigwait_leaf(); KEEP(); }
NOINLINE void* sigwait_main(void*) { sigwait_mid(); KEEP(); return nullptr; }

NOINLINE void epoll_leaf(void) {
  int ep = epoll_create1(0);
  struct epoll_event ev = {};
  ev.events = EPOLLIN;
  epoll_ctl(ep, EPOLL_CTL_ADD, g_never_pipe[0], &ev);
  announce("epoll");
  while (true) epoll_wait(ep, &ev, 1, -1);
}
NOINLINE void epoll_mid(void) { epoll_leaf(); KEEP(); }
NOINLINE void* epoll_main(void*) { epoll_mid(); KEEP(); return nullptr; }

// Signal handler on the thread's normal stack; it parks inside the handler.
NOINLINE void handler_park(const char* role) {
  announce(role);
  char c;
  while (true) (void)!read(g_never_pipe[0], &c, 1);
}
NOINLINE void on_sigusr1(int) { handler_park("signal"); KEEP(); }
NOINLINE void on_sigurg(int) { handler_park("altstack"); KEEP(); }

NOINLINE void signal_raise(void) { pthread_kill(pthread_self(), SIGUSR1); KEEP(); }
NOINLINE void signal_mid(void) { signal_raise(); KEEP(); }
NOINLINE void* signal_main(void*) {
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGUSR1);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
  signal_mid();
  KEEP();
  return nullptr;
}

NOINLINE void altstack_raise(void) { pthread_kill(pthread_self(), SIGURG); KEEP(); }
NOINLINE void altstack_mid(void) { altstack_raise(); KEEP(); }
NOINLINE void* altstack_main(void*) {
  stack_t ss;
  ss.ss_size = 256 * 1024;
  ss.ss_sp = malloc(ss.ss_size);
  ss.ss_flags = 0;
  sigaltstack(&ss, nullptr);
  sigset_t s;
  sigemptyset(&s);
  sigaddset(&s, SIGURG);
  pthread_sigmask(SIG_UNBLOCK, &s, nullptr);
  altstack_mid();
  KEEP();
  return nullptr;
}

NOINLINE void* bench_main(void*) { nanosleep_mid(); KEEP(); return nullptr; }

}  // extern "C"

namespace fx {

struct Guard {
  NOINLINE ~Guard() {
    if (std::uncaught_exceptions() > 0) {
      announce("exception");
      char c;
      while (true) (void)!read(g_never_pipe[0], &c, 1);
    }
  }
};

NOINLINE void throwing_leaf(int v) {
  if (v >= 0) throw std::runtime_error("fixture");
  KEEP();
}
NOINLINE void guarded_mid(int v) {
  Guard g;
  throwing_leaf(v);
  KEEP();
}
NOINLINE void* exception_main(void*) {
  try {
    guarded_mid(1);
  } catch (const std::exception&) {
  }
  return nullptr;
}

volatile int g_depth_sink;
volatile bool g_forever = true;
NOINLINE int recurse(int depth) {
  if (depth == 0) {
    announce("recursion");
    struct timespec ts = {100000, 0};
    while (g_forever) nanosleep(&ts, nullptr);
    return 0;
  }
  int r = recurse(depth - 1);
  g_depth_sink = r;  // work after the call: no tail call, no loop
  KEEP();
  return r + 1;
}
NOINLINE void* recursion_main(void*) {
  g_depth_sink = recurse(200);
  return nullptr;
}

}  // namespace fx

namespace {

// Churn: threads that come and go while the capture runs.
void* churn_worker(void*) {
  struct timespec ts = {0, 200000};
  nanosleep(&ts, nullptr);
  return nullptr;
}
void* churn_main(void*) {
  announce("churn");
  while (true) {
    pthread_t t;
    if (pthread_create(&t, nullptr, churn_worker, nullptr) == 0) pthread_join(t, nullptr);
  }
  return nullptr;
}

void* vfork_main(void*) {
  announce("vfork");
  pid_t c = vfork();
  if (c == 0) {
    // The child shares the parent's memory; it must only call async-signal-safe functions and
    // _exit. Sleeping here keeps the parent thread inside vfork.
    struct timespec ts = {100000, 0};
    nanosleep(&ts, nullptr);
    _exit(0);
  }
  return nullptr;
}

// Every parked thread is asleep in the kernel: its /proc/self/task/TID/stat state is 'S'.
bool all_asleep(pid_t self_tid) {
  DIR* d = opendir("/proc/self/task");
  if (!d) return false;
  bool ok = true;
  while (struct dirent* e = readdir(d)) {
    if (e->d_name[0] == '.') continue;
    if (atoi(e->d_name) == self_tid) continue;
    std::string p = std::string("/proc/self/task/") + e->d_name + "/stat";
    FILE* f = fopen(p.c_str(), "r");
    if (!f) continue;
    char buf[512] = {};
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    const char* rp = strrchr(buf, ')');
    if (!rp || rp[1] != ' ' || (rp[2] != 'S' && rp[2] != 'D')) ok = false;
  }
  closedir(d);
  return ok;
}

pthread_t spawn(void* (*fn)(void*)) {
  pthread_t t;
  pthread_attr_t a;
  pthread_attr_init(&a);
  pthread_attr_setstacksize(&a, 1 << 20);
  if (pthread_create(&t, &a, fn, nullptr) != 0) {
    perror("fixture: pthread_create");
    exit(3);
  }
  pthread_attr_destroy(&a);
  return t;
}

}  // namespace

// Main parks here after printing "ready"; the driver waits until it is asleep (state S).
extern "C" NOINLINE void join_leaf(pthread_t t) {
  pthread_join(t, nullptr);
  KEEP();
}
extern "C" NOINLINE void join_mid(pthread_t t) { join_leaf(t); KEEP(); }

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "all";
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (pipe(g_never_pipe) != 0) return 3;

  // Signals used by the fixture are blocked everywhere except in the thread that takes them.
  sigset_t block;
  sigemptyset(&block);
  sigaddset(&block, SIGUSR1);
  sigaddset(&block, SIGUSR2);
  sigaddset(&block, SIGURG);
  pthread_sigmask(SIG_BLOCK, &block, nullptr);
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_sigusr1;
  sigaction(SIGUSR1, &sa, nullptr);
  sa.sa_handler = on_sigurg;
  sa.sa_flags = SA_ONSTACK;
  sigaction(SIGURG, &sa, nullptr);

  if (mode == "zombie-child") {
    pid_t c = fork();
    if (c == 0) _exit(0);
    printf("child %d\n", c);
    printf("thread %d join\nready\n", gettid_());
    join_mid(spawn(nanosleep_main));
    return 0;
  }

  std::vector<void* (*)(void*)> fns;
  if (mode == "bench") {
    const int total = argc > 2 ? atoi(argv[2]) : 16;
    for (int i = 1; i < total && i < 1024; i++) fns.push_back(bench_main);
  } else if (mode == "vfork") {
    fns = {nanosleep_main, vfork_main};
  } else if (mode == "all" || mode == "churn" || mode == "exit-soon") {
    fns = {nanosleep_main, read_main,     condwait_main,       poll_main,     select_main,
           accept_main,    sigwait_main,  epoll_main,          signal_main,   altstack_main,
           fx::exception_main, fx::recursion_main};
    if (mode == "churn") fns.push_back(churn_main);
  } else {
    fprintf(stderr, "fixture: unknown mode '%s'\n", mode.c_str());
    return 2;
  }
  std::vector<pthread_t> ts;
  for (auto fn : fns) ts.push_back(spawn(fn));
  const int expected = static_cast<int>(fns.size());
  for (int i = 0; i < 20000 && g_parked.load() < expected; i++) usleep(500);
  if (g_parked.load() < expected) {
    fprintf(stderr, "fixture: only %d of %d threads parked\n", g_parked.load(), expected);
    return 3;
  }
  // Announcing happens just before the blocking call: wait until each is asleep in the kernel
  // (the churn thread is never reliably asleep; give it a fixed delay instead).
  const pid_t self = gettid_();
  for (int i = 0; i < 4000 && mode != "churn" && !all_asleep(self); i++) usleep(500);
  usleep(20000);
  if (mode == "exit-soon") {
    const int ms = argc > 2 ? atoi(argv[2]) : 30;
    printf("thread %d exit\nready\n", self);
    usleep(ms * 1000);
    _exit(0);
  }
  // Main parks in pthread_join on a thread that never ends: printed before "ready".
  pthread_mutex_lock(&g_print_mu);
  printf("thread %d join\n", self);
  printf("ready\n");
  pthread_mutex_unlock(&g_print_mu);
  join_mid(ts[0]);
  return 0;
}
