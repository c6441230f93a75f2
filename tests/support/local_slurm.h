// A real, private Slurm cluster of one node for a test: munged, slurmctld and slurmd (Debian's
// slurm-wlm and munge) started in the foreground from a temporary folder with a generated
// slurm.conf (loopback, this machine's CPUs from `slurmd -C`, SlurmUser=root, state, spool, logs
// and the munge socket in the folder, free ports), each start bounded by a timeout, all stopped by
// the destructor. When something cannot start, ok() is false and reason() says why (with the tail
// of the daemon's log): the test then skips visibly.
#pragma once

#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "tests/support/run_shell.h"

namespace lathe::test {

class LocalSlurm {
 public:
  explicit LocalSlurm(const std::filesystem::path& dir) : m_dir(std::filesystem::absolute(dir)) {
    try {
      start();
    } catch (const std::exception& e) {
      m_reason = e.what();
      stop();
    }
  }
  ~LocalSlurm() { stop(); }
  LocalSlurm(const LocalSlurm&) = delete;
  LocalSlurm& operator=(const LocalSlurm&) = delete;

  bool ok() const { return m_reason.empty(); }
  const std::string& reason() const { return m_reason; }
  /// "SLURM_CONF=<dir>/slurm.conf " to put before sbatch, squeue, scancel and lathe-cli.
  std::string env() const { return "SLURM_CONF=" + (m_dir / "slurm.conf").string() + " "; }
  /// True when squeue lists no task of `job` any more.
  bool job_done(const std::string& job) const {
    const CmdResult r = run_shell(env() + "squeue -h -j " + job + " -o %i");
    return r.code != 0 || r.out.find_first_not_of(" \n") == std::string::npos;
  }

 private:
  static bool have(const std::string& program) { return run_shell("command -v " + program).code == 0; }

  static int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      throw std::runtime_error("no free loopback port");
    ::close(fd);
    return ntohs(a.sin_port);
  }

  std::string tail(const std::string& file) const {
    const CmdResult r = run_shell("tail -n 5 " + (m_dir / file).string());
    return "\n--- " + file + ":\n" + r.out;
  }

  pid_t spawn(const std::vector<std::string>& args, const std::string& log) {
    const pid_t pid = ::fork();
    if (pid == 0) {
      FILE* f = std::freopen((m_dir / log).c_str(), "w", stdout);
      (void)f;
      ::dup2(1, 2);
      ::setenv("SLURM_CONF", (m_dir / "slurm.conf").c_str(), 1);
      std::vector<char*> argv;
      std::vector<std::string> copy = args;
      for (std::string& a : copy)
        argv.push_back(a.data());
      argv.push_back(nullptr);
      ::execvp(argv[0], argv.data());
      ::_exit(127);
    }
    m_pids.push_back(pid);
    return pid;
  }

  /// Polls `ready` every 100 ms for `seconds`; throws `what` with the log's tail when it never is.
  template <class F>
  void wait_for(F ready, double seconds, const std::string& what, const std::string& log) {
    const auto end = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < end) {
      if (ready())
        return;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    throw std::runtime_error(what + " within " + std::to_string(static_cast<int>(seconds)) + " s" + tail(log));
  }

  void start() {
    for (const char* p : {"munged", "mungekey", "slurmctld", "slurmd", "sbatch", "squeue", "sinfo", "scancel"})
      if (!have(p))
        throw std::runtime_error(std::string(p) +
                                 " not installed (apt-get install slurmctld slurmd slurm-client munge)");
    std::filesystem::create_directories(m_dir / "state");
    std::filesystem::create_directories(m_dir / "spool");
    ::chmod(m_dir.c_str(), 0711);  // munged wants its socket folder searchable, not writable, by others
    const std::string d = m_dir.string();
    if (run_shell("mungekey -c -b 1024 -k " + d + "/munge.key && chmod 600 " + d + "/munge.key").code != 0)
      throw std::runtime_error("mungekey failed");
    spawn({"munged", "-F", "--force", "--key-file=" + d + "/munge.key", "--socket=" + d + "/munge.sock",
           "--pid-file=" + d + "/munged.pid", "--seed-file=" + d + "/munged.seed", "--log-file=" + d + "/munged.log"},
          "munged.out");
    wait_for([&] { return run_shell("{ munge -n -S " + d + "/munge.sock | unmunge -S " + d + "/munge.sock; }").code == 0; },
             10, "munged did not answer", "munged.out");

    CmdResult node = run_shell("slurmd -C | head -n 1");
    if (node.code != 0 || node.out.rfind("NodeName=", 0) != 0)
      throw std::runtime_error("slurmd -C failed: " + node.out);
    std::string line = node.out.substr(0, node.out.find('\n'));
    const size_t mem = line.find(" RealMemory=");
    if (mem != std::string::npos)
      line = line.substr(0, mem);  // the default (1 MB) never exceeds what the node has
    m_node = line.substr(9, line.find(' ') - 9);
    std::ofstream(m_dir / "slurm.conf")
        << "ClusterName=lathetest\nSlurmctldHost=" << m_node << "(127.0.0.1)\nSlurmUser=root\nSlurmdUser=root\n"
        << "SlurmctldPort=" << free_port() << "\nSlurmdPort=" << free_port() << "\n"
        << "AuthType=auth/munge\nCredType=cred/munge\nAuthInfo=socket=" << d << "/munge.sock\n"
        << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool\n"
        << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d << "/slurmd.pid\n"
        << "SlurmctldLogFile=" << d << "/slurmctld.log\nSlurmdLogFile=" << d << "/slurmd.log\n"
        << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nJobAcctGatherType=jobacct_gather/none\n"
        << "SelectType=select/cons_tres\nSelectTypeParameters=CR_Core\nSchedulerType=sched/builtin\n"
        << "ReturnToService=2\nAccountingStorageType=accounting_storage/none\nJobCompType=jobcomp/none\n"
        << "MpiDefault=none\nSwitchType=switch/none\nSlurmctldTimeout=30\nSlurmdTimeout=30\n"
        << line << " NodeAddr=127.0.0.1\n"
        << "PartitionName=lathe Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
    spawn({"slurmctld", "-D", "-c", "-f", d + "/slurm.conf"}, "slurmctld.out");
    wait_for([&] { return run_shell(env() + "sinfo -h -o %P").code == 0; }, 20, "slurmctld did not answer",
             "slurmctld.log");
    spawn({"slurmd", "-D", "-N", m_node, "-f", d + "/slurm.conf"}, "slurmd.out");
    wait_for([&] { return run_shell(env() + "sinfo -h -N -o %T").out.find("idle") != std::string::npos; }, 30,
             "the node did not come up idle", "slurmd.log");
  }

  void stop() {
    // slurmd first (it ends the job steps), then slurmctld, then munged; each gets 10 s.
    for (auto it = m_pids.rbegin(); it != m_pids.rend(); ++it) {
      ::kill(*it, SIGTERM);
      int status = 0;
      const auto end = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (::waitpid(*it, &status, WNOHANG) == 0) {
        if (std::chrono::steady_clock::now() > end) {
          ::kill(*it, SIGKILL);
          ::waitpid(*it, &status, 0);
          break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
    m_pids.clear();
  }

  std::filesystem::path m_dir;
  std::string m_node;
  std::string m_reason;
  std::vector<pid_t> m_pids;
};

}  // namespace lathe::test
