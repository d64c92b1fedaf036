#include "launch/serve_command.h"

#include <algorithm>
#include <csignal>
#include <ctime>
#include <filesystem>

#include "engine/kernels/kernel_set.h"
#include "launch/cli.h"
#include "launch/output_format.h"
#include "launch/rank_run.h"
#include "runtime/error.h"
#include "runtime/log.h"
#include "runtime/stop_signal.h"
#include "serve/server.h"
#include "topology/machine.h"

namespace tps {

namespace {

// What the status panel shows of this rank, gathered on rank 0.
nlohmann::json rank_status(const MpiSession& mpi, const RankSetup& setup, const RankRun& r, const Generator& gen) {
  const Shard& s = r.shard();
  return {{"rank", mpi.rank()},
          {"host", mpi.host()},
          {"numa_node", r.numa_node},
          {"pus", format_index_list(setup.binding.pus)},
          {"threads", setup.binding.threads},
          {"holds", share_text(s.share, s.mode)},
          {"weight_bytes", r.model.weights.memory.size()},
          {"pages_on_node", r.on_node},
          {"kv_bytes", gen.kv().bytes()}};
}

// Bytes of the vocabulary's longest token: text longer than the context
// times this cannot fit it (ApiLimits::prompt_bytes).
size_t longest_token(const Tokenizer& t) {
  size_t n = 0;
  for (int32_t id = 0; id < t.vocab_size(); ++id) n = std::max(n, t.token_bytes(id).size());
  return n;
}

}  // namespace

RunMode add_serve_command(CLI::App& app, ServeOptions& so, RunOptions& run) {
  CLI::App* serve = app.add_subcommand(
      "serve",
      "an OpenAI-compatible HTTP server (/v1/chat/completions, /v1/completions, /v1/responses, /v1/models, "
      "/health, "
      "/metrics, and a chat page at /): rank 0 listens, every rank runs every step; --parallel "
      "sequences at once (default 4); SIGTERM or Ctrl-C stops it once what runs is done");
  serve->add_option("--host", so.host, "address to listen on")->capture_default_str();
  serve->add_option("--port", so.port, "port to listen on (0: any free one)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  serve->add_option("--api-key", so.api_keys,
                    "require this key on /v1/* (\"Authorization: Bearer KEY\" or \"x-api-key: KEY\"); repeat for "
                    "several: the responses one key stores only it reads");
  serve->add_option("--api-keys-file", so.api_keys_file, "more keys, one a line (# starts a comment)");
  serve
      ->add_option("--max-queue", so.max_queue,
                   "requests that may wait for a place; more are answered 503 with Retry-After")
      ->check(CLI::Range(1, ServeOptions::kMaxQueue))
      ->capture_default_str();
  serve->add_option("--timeout", so.request_seconds, "seconds a request may take, waiting included")
      ->check(positive_seconds(ServeOptions::kMaxRequestSeconds))
      ->capture_default_str();
  serve
      ->add_option("--responses-max", so.responses_max,
                   "responses the Responses API stores (for GET and previous_response_id); past it, or past "
                   "--responses-mib, the least recently used goes")
      ->check(CLI::Range(1, ServeOptions::kMaxResponses))
      ->capture_default_str();
  serve->add_option("--responses-mib", so.responses_mib, "MiB the stored responses may take")
      ->check(CLI::Range(1, ServeOptions::kMaxResponsesMib))
      ->capture_default_str();
  serve->add_option("--alias", run.alias, "the model's id in the API (default: the file's name)");
  serve
      ->add_option_function<std::string>(
          "--log-requests", [&so](const std::string& v) { so.log_requests = v == "on"; },
          "on (the default): a line on stderr per request -- route, status, prompt, cached and generated tokens, "
          "time to the first token and in all, the client's user agent; off: none (-q silences them too)")
      ->check(CLI::IsMember({"on", "off"}))
      ->type_name("on|off");
  serve->fallthrough();
  return {serve,
          {run_group::model, run_group::sequences, run_group::prefix_cache, run_group::speculation,
           run_group::output_format}};
}

int run_serve(const RunOptions& given, const ServeOptions& so, const MpiSession& mpi, const RankSetup& setup) {
  const bool root = mpi.rank() == 0;
  RunOptions o = given;
  catch_stop_signals();           // rank 0 stops the server; the others end when it ends the engine loop
  std::signal(SIGPIPE, SIG_IGN);  // a client gone while we write: an error return, not a signal
  std::unique_ptr<Server> server;
  if (root) {
    ServeOptions options = so;  // room for every waiting and running request, and for /health and idle clients
    options.max_connections = so.max_queue + o.parallel + 64;
    if (!so.api_keys_file.empty())
      for (std::string& key : read_api_keys(so.api_keys_file)) options.api_keys.push_back(std::move(key));
    server = std::make_unique<Server>(options);
    server->listen();  // /health says "loading" while the model loads
    log_info("listening on http://", so.host, ":", server->port(), " (loading the model)");
    if (options.api_keys.empty() && so.host != "127.0.0.1" && so.host != "localhost" && so.host != "::1")
      log_warn("listening on ", so.host, " without --api-key: anyone who can reach it can use it");
  }
  GgufFile file = open_model(o, mpi);
  if (!o.context_given) o.context = default_context(o, mpi, setup, file);
  resolve_cache_ram(o, mpi, setup, file);
  RankRun r(o, mpi, setup, Clock::now(), std::move(file));
  Generator gen(r.model, r.pool, r.exchange, generator_options(o));
  // Every rank: each refuses a bad file alike, and has it compiled (with the
  // vocabulary's index) before the first request announces it.
  const ContentSpec default_final = output_format_final(o, gen.constraints());
  const std::vector<std::string> ranks = mpi.gather_to_root(rank_status(mpi, setup, r, gen).dump());
  if (!root) {
    gen.run({});
    return 0;
  }
  nlohmann::json status = {{"model", std::filesystem::path(o.model).stem().string()},
                           {"file", o.model},
                           {"split", split_mode_name(r.shard().mode)},
                           {"kernels", isa_name(best_kernel_set().isa)},
                           {"kv_type", kv_type_name(gen.kv().type())},
                           {"started", std::time(nullptr)},
                           {"ranks", nlohmann::json::array()}};
  for (const std::string& text : ranks) status["ranks"].push_back(nlohmann::json::parse(text));
  const std::string model_id = o.alias.empty() ? status["model"].get<std::string>() : o.alias;
  status["model"] = model_id;
  server->ready(gen, r.model.tokenizer, ApiLimits{model_id, o.context, longest_token(r.model.tokenizer), default_final},
                status);
  r.log_kv_pool(gen);
  const SchedulerOptions& sched = gen.scheduler().options();
  const uint32_t trained = r.model.config.n_ctx_train;
  const std::string why = given.context_given ? std::string("--ctx")
                          : static_cast<uint32_t>(sched.context) == trained
                              ? std::string("the model's context")
                              : cat(o.kv_size.empty() ? cat("what memory holds for --parallel ", o.parallel)
                                                      : std::string("what --kv-size holds"),
                                    "; the model's is ", trained);
  log_info("serving ", model_id, " on http://", so.host, ":", server->port(), ": up to ", sched.max_sequences,
           " sequence(s) at once of up to ", sched.context, " positions (", why, "), ", so.max_queue, " more waiting");
  Generator::Events events = server->events();
  events.between_steps = [&, inner = events.between_steps](bool idle) {
    if (stop_signal() != 0) server->request_stop();
    return inner(idle);
  };
  // The server ends (its threads answered and joined) before the model and
  // the generator they use: a request that came in as the loop ended is
  // answered 503, not left waiting.
  try {
    gen.run(events);
  } catch (...) {
    server.reset();
    throw;
  }
  server.reset();
  log_info("stopped: every request answered");
  return 0;
}

}  // namespace tps
