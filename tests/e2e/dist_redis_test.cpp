// Two processes, as two nodes would be, meet through a redis-server started here on a free loopback
// port (Gloo's RedisStore) and all-reduce gradients; a missing rank is named with the redis store.
// Two `lathe-cli run` processes started separately (--rank/--world-size) meet the same way and
// end with the weights, bit for bit, of the same run through a FileStore folder (compute.devices=2),
// and not with those of one rank alone on the same global batch size.
// Skips, saying why, when redis-server is not installed. The server is killed at the end.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <thread>
#include <vector>

#include "engine/dist/gloo_communicator.h"
#include "engine/nn/safetensors.h"
#include "engine/store/store.h"
#include "tests/e2e/cli_test_util.h"
#include "tests/support/multi_process.h"

using lathe::dist::GlooCommunicator;
using lathe::dist::GlooOptions;
using lathe::test::require;

namespace {

// A loopback port nothing listens on now (the kernel's pick for port 0).
int free_port() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(fd);
    return -1;
  }
  close(fd);
  return ntohs(addr.sin_port);
}

bool accepts(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  const bool ok = connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
  close(fd);
  return ok;
}

std::string redis_server_path() {
  for (const char* p : {"/usr/bin/redis-server", "/usr/local/bin/redis-server"})
    if (std::filesystem::exists(p))
      return p;
  return "";
}

// redis-server on a loopback port for the test's lifetime, killed (and reaped) at the end.
class RedisServer {
 public:
  RedisServer(const std::string& binary, int port, const std::filesystem::path& dir) : m_port(port) {
    m_pid = fork();
    if (m_pid == 0) {
      const std::string port_text = std::to_string(port);
      execl(binary.c_str(), binary.c_str(), "--port", port_text.c_str(), "--bind", "127.0.0.1", "--save", "",
            "--appendonly", "no", "--dir", dir.c_str(), "--loglevel", "warning", static_cast<char*>(nullptr));
      _exit(127);
    }
  }
  ~RedisServer() {
    if (m_pid <= 0)
      return;
    kill(m_pid, SIGTERM);
    for (int i = 0; i < 200; ++i) {  // 2 s, then SIGKILL
      if (waitpid(m_pid, nullptr, WNOHANG) == m_pid)
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    kill(m_pid, SIGKILL);
    waitpid(m_pid, nullptr, 0);
  }
  /// Whether it listens within `within_s`. A server that exited (the port taken between free_port()
  /// and its bind) is not ready, even if whatever took the port accepts.
  bool ready(double within_s) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(within_s);
    while (std::chrono::steady_clock::now() < end) {
      if (waitpid(m_pid, nullptr, WNOHANG) == m_pid) {
        m_pid = -1;
        return false;
      }
      if (accepts(m_port))
        return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
  }

 private:
  pid_t m_pid = -1;
  int m_port;
};

}  // namespace

TEST(DistRedis, TwoProcessesMeetThroughRedisServer) {
  const std::string binary = redis_server_path();
  if (binary.empty())
    GTEST_SKIP() << "redis-server is not installed (Debian package redis-server)";
  const int port = free_port();
  ASSERT_GT(port, 0);
  const auto dir = lathe::test::fresh_temp_folder("redis");
  {
    RedisServer server(binary, port, dir);
    ASSERT_TRUE(server.ready(5)) << "redis-server did not listen on 127.0.0.1:" << port << " within 5 s";
    GlooOptions opts;
    opts.rendezvous = "redis://127.0.0.1:" + std::to_string(port);
    opts.run_id = "e2e-" + std::to_string(getpid());
    opts.timeout_s = 10;
    opts.bucket_mb = 8.0 / (1024 * 1024);  // 2 floats a bucket: 3 buckets for 5 elements
    auto results = lathe::test::run_processes(
        2,
        [&](int r) {
          GlooCommunicator comm(r, 2, opts);
          require(comm.store_description() == "redis store 127.0.0.1:" + std::to_string(port),
                  comm.store_description());
          lathe::Param p{"w", lathe::Tensor::zeros({5}, lathe::DType::f32),
                         lathe::Tensor::zeros({5}, lathe::DType::f32)};
          for (int i = 0; i < 5; ++i)
            p.grad.set_flat(i, (r + 1) * 10 + i);  // rank 0: 10+i, rank 1: 20+i
          std::vector<lathe::NamedParam> named = {{"0.w", &p}};
          comm.all_reduce_gradients(named);
          require(comm.last_bucket_count() == 3, "buckets");
          for (int i = 0; i < 5; ++i)
            require(p.grad.at_flat(i) == 15 + i, "mean of element " + std::to_string(i));
          comm.barrier();
        },
        30);
    for (const auto& r : results)
      EXPECT_TRUE(r.exited_ok) << "rank " << r.index << ": " << r.message;

    // Rank 1 of 2 never comes: rank 0 names it and the redis store.
    opts.run_id += "-missing";
    opts.timeout_s = 1;
    auto lonely = lathe::test::run_processes(
        1, [&](int) { GlooCommunicator comm(0, 2, opts); }, 15);
    EXPECT_FALSE(lonely[0].exited_ok);
    EXPECT_LT(lonely[0].seconds, 3.0);
    EXPECT_NE(lonely[0].message.find("ranks 1 did not join"), std::string::npos) << lonely[0].message;
    EXPECT_NE(lonely[0].message.find("redis store 127.0.0.1"), std::string::npos) << lonely[0].message;
  }
  EXPECT_TRUE(lathe::test::no_children_left());
  std::filesystem::remove_all(dir);
}

namespace {

/// The final test/loss and test/accuracy of the only run in the store `db`.
std::pair<double, double> final_test_metrics(const std::string& db) {
  lathe::Store store = lathe::Store::open(db);
  const lathe::RunPage page = store.list_runs();
  if (page.runs.size() != 1)
    return {NAN, NAN};
  const auto* loss = page.runs[0].metric("test/loss");
  const auto* acc = page.runs[0].metric("test/accuracy");
  return {loss ? loss->last : NAN, acc ? acc->last : NAN};
}

/// Every parameter of the one model.safetensors under `runs` (rank 0's run folder), by name.
std::map<std::string, std::vector<float>> saved_weights(const std::filesystem::path& runs) {
  std::map<std::string, std::vector<float>> w;
  for (const auto& e : std::filesystem::directory_iterator(runs))
    if (e.is_directory() && std::filesystem::exists(e.path() / "model.safetensors"))
      for (auto& [name, t] : lathe::load_safetensors((e.path() / "model.safetensors").string()).tensors)
        w[name].assign(t.data<float>(), t.data<float>() + t.numel());
  return w;
}

/// What two separately started ranks ended with: rank 0's result, rank 1's exit status and log.
struct TwoRanks {
  lathe::test::CmdResult rank0;
  int rank1_code = -1;
  std::string rank1_log;
};

/// Runs `command --rank 1` in the background (prefixed by `rank1_prefix`, e.g. another mount
/// namespace), then `command --rank 0` here, and waits up to 10 s for rank 1's end. Its exit status
/// is written aside and renamed into place: `echo $? > file` creates the file empty before writing
/// the status, and a poll between the two would read no status.
TwoRanks run_two_ranks(const std::string& command, const std::string& rank1_prefix, const std::filesystem::path& dir) {
  TwoRanks out;
  const std::string log1 = (dir / "rank1.txt").string();
  std::filesystem::remove(log1 + ".rc");
  const lathe::test::CmdResult started = lathe::test::run_shell("(" + rank1_prefix + command + " --rank 1 > " + log1 +
                                                                " 2>&1; echo $? > " + log1 + ".rc.tmp; mv " + log1 +
                                                                ".rc.tmp " + log1 + ".rc) > /dev/null 2>&1 &");
  if (started.code != 0) {
    out.rank1_log = "could not start rank 1: " + started.out;
    return out;
  }
  out.rank0 = lathe::test::run_shell(command + " --rank 0");
  for (int i = 0; i < 200 && !std::filesystem::exists(log1 + ".rc"); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::ifstream rc(log1 + ".rc");
  rc >> out.rank1_code;
  std::ifstream log(log1);
  out.rank1_log = (std::filesystem::exists(log1 + ".rc") ? "" : "rank 1 had not ended 10 s after rank 0\n") +
                  std::string(std::istreambuf_iterator<char>(log), {});
  return out;
}

}  // namespace

TEST(DistRedis, TwoLatheCliRunsMeetThroughRedisServer) {
  const std::string binary = redis_server_path();
  if (binary.empty())
    GTEST_SKIP() << "redis-server is not installed (Debian package redis-server)";
  const int port = free_port();
  ASSERT_GT(port, 0);
  const auto dir = lathe::test::fresh_temp_folder("redis-cli");
  const std::string cfg = (dir / "tiny.json").string();
  std::ofstream(cfg) << R"({"model": {"zoo": "mlp"}, "train": {"epochs": 1, "threads": 1},
                            "data": {"train_subset": 512, "test_subset": 256}})";
  const std::string common = lathe::test::cli_binary() + " --db " + (dir / "redis.db").string() + " run " + cfg +
                             " --set output.dir=" + (dir / "runs-redis").string() +
                             " --set compute.timeout_s=10 --world-size 2 --rendezvous-id cli-" +
                             std::to_string(getpid()) +
                             " --set compute.rendezvous=redis://127.0.0.1:" + std::to_string(port);
  {
    RedisServer server(binary, port, dir);
    ASSERT_TRUE(server.ready(5)) << "redis-server did not listen on 127.0.0.1:" << port << " within 5 s";
    // Rank 1 in the background (its output in a file), rank 0 here.
    const TwoRanks ranks = run_two_ranks(common, "", dir);
    EXPECT_EQ(ranks.rank0.code, 0) << ranks.rank0.out;
    EXPECT_NE(ranks.rank0.out.find("as rank 0 of 2"), std::string::npos) << ranks.rank0.out;
    EXPECT_EQ(ranks.rank1_code, 0) << ranks.rank1_log;
  }
  const auto redis = final_test_metrics((dir / "redis.db").string());  // rank 1 wrote nothing there
  EXPECT_TRUE(std::isfinite(redis.first));
  // The same run with both ranks on this machine, meeting in a FileStore folder: the same weights,
  // bit for bit (each rank trains on its half of every global batch), so the same test figures.
  const lathe::test::CmdResult file_run =
      lathe::test::run_shell(lathe::test::cli_binary() + " --db " + (dir / "file.db").string() + " run " + cfg +
                             " --set output.dir=" + (dir / "runs-file").string() + " --set compute.devices=2");
  ASSERT_EQ(file_run.code, 0) << file_run.out;
  const auto file = final_test_metrics((dir / "file.db").string());
  EXPECT_EQ(redis.first, file.first);
  EXPECT_EQ(redis.second, file.second);
  const auto redis_w = saved_weights(dir / "runs-redis"), file_w = saved_weights(dir / "runs-file");
  ASSERT_FALSE(redis_w.empty());
  EXPECT_TRUE(redis_w == file_w) << "the redis run's weights differ from the FileStore run's";
  // What each rank would end with had it trained alone on all the data (the same batch size, half the
  // global batch, twice the steps) is far from it: the ranks did split the batches.
  const lathe::test::CmdResult alone =
      lathe::test::run_shell(lathe::test::cli_binary() + " --db " + (dir / "alone.db").string() + " run " + cfg +
                             " --set output.dir=" + (dir / "runs-alone").string());
  ASSERT_EQ(alone.code, 0) << alone.out;
  EXPECT_FALSE(saved_weights(dir / "runs-alone") == file_w);
  std::filesystem::remove_all(dir);
}

// Two machines share no memory: rank 1 in a mount namespace of its own with an empty /dev/shm
// cannot map rank 0's shared-memory segment, so both ranks keep tcp (a rank 0 that had mapped it
// waited there for a rank that never came, until compute.timeout_s). ZeRO-1 then gathers over tcp
// too. The weights are those of the same run with both ranks on one machine (through shared
// memory), bit for bit. Skips where this process may not make a mount namespace.
TEST(DistRedis, RanksOnMachinesThatShareNoMemoryMeetOverTcp) {
  const std::string binary = redis_server_path();
  if (binary.empty())
    GTEST_SKIP() << "redis-server is not installed (Debian package redis-server)";
  const std::string isolated = "unshare -m sh -c 'mount -t tmpfs lathe-no-shm /dev/shm && exec \"$0\" \"$@\"' ";
  if (lathe::test::run_shell(isolated + "true").code != 0)
    GTEST_SKIP() << "cannot give a process its own /dev/shm here (unshare -m and mount need root)";
  const int port = free_port();
  ASSERT_GT(port, 0);
  const auto dir = lathe::test::fresh_temp_folder("redis-noshm");
  const std::string cfg = (dir / "tiny.json").string();
  std::ofstream(cfg) << R"({"model": {"zoo": "mlp"}, "train": {"epochs": 1, "threads": 1},
                            "data": {"train_subset": 512, "test_subset": 256},
                            "compute": {"shard_optimizer": true}})";
  const std::string common = lathe::test::cli_binary() + " --db " + (dir / "redis.db").string() + " run " + cfg +
                             " --set output.dir=" + (dir / "runs-redis").string() +
                             " --set compute.timeout_s=10 --world-size 2 --rendezvous-id noshm-" +
                             std::to_string(getpid()) +
                             " --set compute.rendezvous=redis://127.0.0.1:" + std::to_string(port);
  {
    RedisServer server(binary, port, dir);
    ASSERT_TRUE(server.ready(5)) << "redis-server did not listen on 127.0.0.1:" << port << " within 5 s";
    const auto t0 = std::chrono::steady_clock::now();
    const TwoRanks ranks = run_two_ranks(common, isolated, dir);
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_EQ(ranks.rank0.code, 0) << ranks.rank0.out;
    EXPECT_EQ(ranks.rank1_code, 0) << ranks.rank1_log;
    EXPECT_LT(seconds, 10.0) << "the ranks waited for each other (compute.timeout_s is 10)";
  }
  const lathe::test::CmdResult file_run =
      lathe::test::run_shell(lathe::test::cli_binary() + " --db " + (dir / "file.db").string() + " run " + cfg +
                             " --set output.dir=" + (dir / "runs-file").string() + " --set compute.devices=2");
  ASSERT_EQ(file_run.code, 0) << file_run.out;
  const auto tcp_w = saved_weights(dir / "runs-redis"), shm_w = saved_weights(dir / "runs-file");
  ASSERT_FALSE(tcp_w.empty());
  EXPECT_TRUE(tcp_w == shm_w) << "the ranks over tcp ended with other weights than the ranks sharing memory";
  std::filesystem::remove_all(dir);
}
