# summary.txt from the runs' --json: the first prompt's prefill and the
# third prompt's own time (its first token less the second's), per run.
import glob, json, statistics
rows = {}
for f in sorted(glob.glob("*-[0-9].json")):
    try:
        j = json.load(open(f))
    except ValueError:
        continue
    s = j["sequences"]
    turn = s[2]["time_to_first_token_s"] - s[1]["time_to_first_token_s"]
    rows.setdefault(f.split("-")[0], []).append(turn)
    print(f, "first prefill %.3f s" % s[0]["time_to_first_token_s"], "third %.3f s" % turn,
          "reused", s[2]["reused_prompt_tokens"], "restored", s[2]["restored_prompt_tokens"],
          "peak_rss_mib %.1f" % j["per_rank"][0]["peak_rss_mib"], "cache_ram_bytes", j["per_rank"][0]["cache_ram_bytes"])
for mode, t in rows.items():
    print(mode, "third prompt median %.3f s of %d runs (%.3f-%.3f)" % (statistics.median(t), len(t), min(t), max(t)))
