// Every file a tps tool writes goes through runtime/output_file: nothing at
// its path is unlinked, truncated or replaced until a whole new file takes
// its place; anything but a regular file, and any file the run reads, is
// refused; an interrupted writer leaves nothing behind. The class, then each
// writer as users run it: perplexity's --save-logits and tps-mkmodel.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "runtime/error.h"
#include "runtime/output_file.h"
#include "tests/test_paths.h"
#include "tests/tool_runner.h"

namespace tps {
namespace {

namespace fs = std::filesystem;
using testing::run_tool;

const std::string kModel = std::string(tps::test_paths::models) + "/gpt-oss-tiny.gguf";

// A directory of its own for each test, removed after it.
class OutputFileTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string name = (fs::temp_directory_path() / "tps-output-XXXXXX").string();
    dir_ = mkdtemp(name.data());
  }
  void TearDown() override { fs::remove_all(dir_); }
  std::string at(const std::string& name) const { return (fs::path(dir_) / name).string(); }
  // What the directory holds, by name.
  std::vector<std::string> listing() const {
    std::vector<std::string> names;
    for (const auto& e : fs::directory_iterator(dir_)) names.push_back(e.path().filename().string());
    std::sort(names.begin(), names.end());
    return names;
  }
  std::string dir_;
};

std::string slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

void spit(const std::string& path, const std::string& text) { std::ofstream(path, std::ios::binary) << text; }

// A text of n sentences (a few thousand tokens for n in the hundreds).
std::string text_of(int n) {
  std::string t;
  for (int i = 0; i < n; ++i)
    t += cat(i ? " " : "", "Sentence ", i, " of the test text counts ", i * 7 % 13, " apples.");
  return t;
}

// A program started in the background (by /bin/sh, which execs it), its
// output discarded.
struct Started {
  pid_t pid = -1;
  explicit Started(const std::string& command) {
    pid = fork();
    if (pid == 0) {
      execl("/bin/sh", "sh", "-c", ("exec " + command + " > /dev/null 2>&1 < /dev/null").c_str(), nullptr);
      _exit(127);
    }
  }
  // Its wait status, waiting at most `seconds`, killing it after that.
  int wait(double seconds = 60) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    int status = 0;
    while (waitpid(pid, &status, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        ADD_FAILURE() << "still running after " << seconds << " s";
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return status;
  }
};

// Waits until `ready` holds (checked every 5 ms) or 60 s have passed.
bool wait_for(const std::function<bool()>& ready) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (!ready()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

TEST_F(OutputFileTest, AppearsOnlyWhenCommitted) {
  const std::string path = at("out.bin");
  spit(path, "what was there");
  {
    OutputFile f(path, {});
    f.write("new bytes", 9);
    f.finish();
    EXPECT_EQ(slurp(path), "what was there");  // whole on disk, not yet in place
    EXPECT_TRUE(fs::exists(f.temporary()));
    EXPECT_EQ(fs::path(f.temporary()).parent_path(), fs::path(dir_));  // beside it: the rename stays in one file system
    f.commit();
  }
  EXPECT_EQ(slurp(path), "new bytes");
  EXPECT_EQ(listing(), std::vector<std::string>{"out.bin"});
}

TEST_F(OutputFileTest, UncommittedLeavesWhatWasThere) {
  const std::string path = at("out.bin");
  spit(path, "what was there");
  {
    OutputFile f(path, {});
    f.write("partial", 7);
  }  // an error unwinding, say
  EXPECT_EQ(slurp(path), "what was there");
  EXPECT_EQ(listing(), std::vector<std::string>{"out.bin"});
  {
    OutputFile f(at("new.bin"), {});
    f.write("partial", 7);
  }
  EXPECT_EQ(listing(), std::vector<std::string>{"out.bin"});  // and nothing new
}

TEST_F(OutputFileTest, ASignalOnAnotherThreadFindsEveryTemporary) {
  // A writer thread creating and dropping temporaries while the signal lands
  // on the main thread: once the handler missed a file opened but not yet
  // armed, or one opened after it had looked. Many runs, each killed at a
  // random moment (a few ms: thousands of files into its loop).
  std::minstd_rand random(7);
  for (int run = 0; run < 60; ++run) {
    int ready[2];
    ASSERT_EQ(pipe(ready), 0);
    const pid_t pid = fork();
    if (pid == 0) {
      std::thread([&] {
        for (;;) OutputFile f(at("out.bin"), {});
      }).detach();
      ::write(ready[1], "r", 1);
      for (;;) pause();
    }
    char c;
    ASSERT_EQ(::read(ready[0], &c, 1), 1);
    close(ready[0]), close(ready[1]);
    std::this_thread::sleep_for(std::chrono::microseconds(500 + random() % 3000));
    kill(pid, SIGTERM);
    int status = 0;
    waitpid(pid, &status, 0);
    ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGTERM) << "status " << status;
    ASSERT_EQ(listing(), std::vector<std::string>{}) << "run " << run;
  }
}

TEST_F(OutputFileTest, RefusesAnythingButARegularFile) {
  fs::create_directory(at("dir"));
  ASSERT_EQ(mkfifo(at("fifo").c_str(), 0600), 0);
  spit(at("file"), "x");
  fs::create_symlink(at("file"), at("link"));
  for (const std::string& target : {at("dir"), at("fifo"), at("link"), std::string("/dev/null")}) {
    try {
      OutputFile f(target, {}, "--flag");
      ADD_FAILURE() << target << " accepted";
    } catch (const InputError& e) {
      EXPECT_NE(std::string(e.what()).find("--flag " + target + ": exists and is not a regular file"),
                std::string::npos)
          << e.what();
    }
  }
  EXPECT_TRUE(fs::is_character_file("/dev/null"));
  EXPECT_EQ(listing(), (std::vector<std::string>{"dir", "fifo", "file", "link"}));
}

TEST_F(OutputFileTest, RefusesAnInputHoweverItIsSpelt) {
  const std::string input = at("model.gguf");
  spit(input, "weights");
  fs::create_hard_link(input, at("other-name.gguf"));
  fs::create_directory(at("sub"));
  for (const std::string& target : {at("other-name.gguf"), at("sub/../model.gguf"), input})
    EXPECT_THROW(OutputFile(target, {input}), InputError) << target;
  EXPECT_EQ(slurp(input), "weights");
  OutputFile ok(at("fresh.gguf"), {input});  // any other path is fine
}

TEST_F(OutputFileTest, ChecksTheTargetAgainAtCommit) {
  const std::string path = at("out.bin");
  OutputFile f(path, {});
  f.write("bytes", 5);
  fs::create_directory(path);  // appeared while the file was written
  EXPECT_THROW(f.commit(), InputError);
  EXPECT_TRUE(fs::is_directory(path));
}

TEST_F(OutputFileTest, TerminatingSignalRemovesTheTemporary) {
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) {
    const pid_t pid = fork();
    if (pid == 0) {
      OutputFile f(at("out.bin"), {});
      f.write("partial", 7);
      raise(sig);
      _exit(0);  // not reached
    }
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;  // still the signal's end
    EXPECT_EQ(listing(), std::vector<std::string>{}) << strsignal(sig);
  }
}

// --- the writers ---

std::string perplexity(const std::string& model, const std::string& args) {
  return cat(tps::test_paths::tpsrun, " -q perplexity -m ", model, " ", args);
}

TEST_F(OutputFileTest, SaveLogitsRefusesAnythingButARegularFile) {
  const std::string text = at("text.txt");
  spit(text, text_of(40));
  fs::create_directory(at("dir"));
  ASSERT_EQ(mkfifo(at("fifo").c_str(), 0600), 0);
  std::vector<std::string> targets{at("dir"), at("fifo")};
  // A device node of our own (/dev/null's numbers): as root a rename over it
  // replaced the device, and an unfinished run unlinked it.
  if (mknod(at("device").c_str(), S_IFCHR | 0666, makedev(1, 3)) == 0) targets.push_back(at("device"));
  for (const std::string& target : targets) {
    const struct stat before = [&] {
      struct stat st {};
      lstat(target.c_str(), &st);
      return st;
    }();
    // (A FIFO with no reader held the old writer's open forever.)
    auto r = run_tool("timeout 60 " + perplexity(kModel, "--ctx 32 -f " + text + " --save-logits " + target));
    EXPECT_EQ(r.exit_code, 2) << target << ": " << r.err;
    EXPECT_NE(r.err.find("tpsrun: --save-logits " + target + ": exists and is not a regular file"), std::string::npos)
        << r.err;
    struct stat after {};
    ASSERT_EQ(lstat(target.c_str(), &after), 0) << target << " is gone";
    EXPECT_EQ(after.st_mode, before.st_mode) << target;
    EXPECT_EQ(after.st_rdev, before.st_rdev) << target;
  }
  EXPECT_EQ(listing().size(), targets.size() + 1);  // no temporary left
}

TEST_F(OutputFileTest, SaveLogitsNeverReplacesAnInput) {
  // A copy of the model: the old writer truncated the file the job had open.
  const std::string model = at("model.gguf"), text = at("text.txt");
  fs::copy_file(kModel, model);
  fs::create_hard_link(model, at("same-model.gguf"));
  spit(text, text_of(40));
  const std::string weights = slurp(model), words = slurp(text);
  for (const std::string& target : {at("same-model.gguf"), model, text}) {
    auto r = run_tool(perplexity(model, "--ctx 32 -f " + text + " --save-logits " + target));
    EXPECT_EQ(r.exit_code, 2) << target << ": " << r.err;
    EXPECT_NE(r.err.find("--save-logits " + target + ": is a file this run reads"), std::string::npos) << r.err;
  }
  EXPECT_TRUE(slurp(model) == weights) << "the model was changed";
  EXPECT_EQ(slurp(text), words);
}

TEST_F(OutputFileTest, InterruptedSaveLeavesWhatWasThere) {
  const std::string text = at("text.txt"), out = at("base.logits");
  spit(text, text_of(300));  // ~15 windows of 256: seconds of work
  spit(out, "a base saved earlier");
  for (int sig : {SIGINT, SIGTERM}) {
    Started run(perplexity(kModel, "--ctx 256 -f " + text + " --save-logits " + out));
    // Once the writer has started (a temporary beside it, or -- the old
    // writer -- the file itself opened and truncated).
    ASSERT_TRUE(wait_for([&] { return listing().size() > 2 || fs::file_size(out) != 20; }));
    kill(run.pid, sig);
    const int status = run.wait();
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_EQ(slurp(out), "a base saved earlier") << strsignal(sig);
    EXPECT_EQ(listing(), (std::vector<std::string>{"base.logits", "text.txt"})) << strsignal(sig);
  }
}

std::string mkmodel(const std::string& args) { return cat(tps::test_paths::tps_mkmodel, " -q ", args); }

TEST_F(OutputFileTest, MkmodelIfMissingKeepsAnyOtherFile) {
  // Someone's file where the model would go, and a model of another seed.
  spit(at("notes.gguf"), "not a model, and not ours");
  fs::copy_file(kModel, at("seed1.gguf"));
  const std::string seed1 = slurp(at("seed1.gguf"));
  for (const auto& [target, args] : {std::pair{at("notes.gguf"), std::string("--preset tiny")},
                                     std::pair{at("seed1.gguf"), std::string("--preset tiny --seed 2")}}) {
    auto r = run_tool(mkmodel(args + " --if-missing -o " + target));
    EXPECT_EQ(r.exit_code, 2) << target << ": " << r.err;
    EXPECT_NE(r.err.find("exists and is not the model --if-missing would write"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("--force replaces it"), std::string::npos) << r.err;
  }
  EXPECT_EQ(slurp(at("notes.gguf")), "not a model, and not ours");
  EXPECT_TRUE(slurp(at("seed1.gguf")) == seed1) << "the other seed's model was replaced";
  // The model it would write is kept as it is, and --force still replaces.
  auto same = run_tool(mkmodel("--preset tiny --if-missing -o " + at("seed1.gguf")));
  EXPECT_EQ(same.exit_code, 0) << same.err;
  EXPECT_TRUE(slurp(at("seed1.gguf")) == seed1);
  auto forced = run_tool(mkmodel("--preset tiny --seed 2 --if-missing --force -o " + at("notes.gguf")));
  EXPECT_EQ(forced.exit_code, 0) << forced.err;
  EXPECT_GT(fs::file_size(at("notes.gguf")), 1000000u);
  EXPECT_EQ(listing(), (std::vector<std::string>{"notes.gguf", "seed1.gguf"}));
}

TEST_F(OutputFileTest, InterruptedMkmodelLeavesNothing) {
  // As it runs, and with every fdopen held 200 ms (slow_fdopen): the signal
  // then comes between the temporary's creation and the writer's next step.
  // (ASan checks that its runtime is loaded first; the preload comes before.)
  const std::string held =
      cat("env ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=", tps::test_paths::slow_fdopen, " ");
  for (const std::string& prefix : {std::string(), held}) {
    for (int sig : {SIGINT, SIGTERM}) {
      // 16 layers of the small preset: ~250 MB, a second or two to write.
      Started run(prefix + mkmodel("--preset small --layers 16 -o " + at("model.gguf")));
      ASSERT_TRUE(wait_for([&] { return !listing().empty(); }));  // its file has been created
      kill(run.pid, sig);
      const int status = run.wait();
      EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
      EXPECT_EQ(listing(), std::vector<std::string>{}) << strsignal(sig) << (prefix.empty() ? "" : ", fdopen held");
      fs::remove_all(dir_), fs::create_directories(dir_);  // each case on its own
    }
  }
}

// A --vocab-json that is not a regular file (a FIFO: opening it waited for
// ever for a writer) is refused as every other input is. (timeout: the
// test ends even when it waits.)
TEST_F(OutputFileTest, MkmodelRefusesAVocabularyThatIsNotARegularFile) {
  const std::string fifo = at("o200k.fifo");
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  for (const std::string& vocab : {fifo, dir_}) {
    auto r = run_tool("timeout 20 " + mkmodel("--preset tiny --vocab-json " + vocab + " -o " + at("m.gguf")));
    EXPECT_EQ(r.exit_code, 2) << vocab << ": " << r.err;
    EXPECT_NE(r.err.find("--vocab-json " + vocab + ": not a regular file"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(at("m.gguf")));
  }
}

TEST_F(OutputFileTest, MkmodelNeverWritesItsVocabulary) {
  const std::string vocab = at("o200k.json");
  fs::copy_file(fs::path(tps::test_paths::reference) / "node_modules/tiktoken/encoders/o200k_base.json", vocab);
  const std::string before = slurp(vocab);
  auto r = run_tool(mkmodel("--preset tiny --force --vocab-json " + vocab + " -o " + vocab));
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("is a file this run reads"), std::string::npos) << r.err;
  EXPECT_TRUE(slurp(vocab) == before);
}

}  // namespace
}  // namespace tps
