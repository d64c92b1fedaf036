# summary.txt from the runs' --json: each run's prompt, reused and restored
# tokens, time to first token (the prefill; for a restart, the restore and
# the rest), and the medians.
import glob, json, statistics
rows = {}
for f in sorted(glob.glob("*-[0-9].json")):
    try:
        j = json.load(open(f))
    except ValueError:  # a run not finished (or failed: its .err says why)
        continue
    s = j["sequences"][0] if "sequences" in j else j
    ttft = j["time_to_first_token_s"]
    rows.setdefault(f.split("-")[0], []).append(ttft)
    r = j["per_rank"][0]
    print(f, "prompt", j["prompt_tokens"], "reused", s.get("reused_prompt_tokens"), "restored",
          s.get("restored_prompt_tokens"), "first token %.3f s" % ttft, "load %.1f s" % j["load_seconds"],
          "disk files", r["cache_disk_files"], "loaded", r["cache_disk_loaded_blocks"], "written",
          r["cache_disk_written_blocks"], "peak_rss_mib %.1f" % r["peak_rss_mib"])
for mode, t in rows.items():
    print(mode, "first token median %.3f s of %d runs (%.3f-%.3f)" % (statistics.median(t), len(t), min(t), max(t)))
