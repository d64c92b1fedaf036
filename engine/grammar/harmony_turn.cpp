#include "engine/grammar/harmony_turn.h"

#include "engine/grammar/json_text.h"
#include "engine/text/harmony.h"
#include "runtime/error.h"

namespace tps {

namespace {

// Any bytes: the free text of an analysis or a final message.
ByteDfa any_text() {
  ByteDfa d;
  const int s = d.add_state(true);
  d.next[s].fill(static_cast<int16_t>(s));
  return d;
}

}  // namespace

int add_harmony_turn(Grammar& g, const Tokenizer& tok, const HarmonyTurn& turn) {
  auto special = [&](const char* name) {
    const std::optional<int32_t> id = tok.special_id(name);
    if (!id) throw InputError(cat("the vocabulary has no ", name, ": it is not harmony's"));
    return Grammar::token(*id);
  };
  auto text = [&](const std::string& s) { return Grammar::rule(g.literal(s)); };
  JsonText json(g);
  const int answer = g.declare("answer");
  if (turn.final_answer) {
    std::vector<Grammar::Element> final{special("<|channel|>"), text("final"), special("<|message|>")};
    if (turn.final_content && turn.final_json) {
      final.insert(final.end(), {json.ws(), Grammar::rule(*turn.final_content), json.ws()});
    } else if (turn.final_content) {
      final.push_back(Grammar::rule(*turn.final_content));
    } else {
      final.push_back(g.loop(any_text()));
    }
    final.push_back(special("<|return|>"));
    g.add_alternative(answer, final);
  }
  for (const HarmonyTurn::Tool& t : turn.tools)
    g.add_alternative(answer,
                      {special("<|channel|>"), text("commentary to=" + tool_recipient(t.name) + " "),
                       special("<|constrain|>"), text("json"), special("<|message|>"), json.ws(),
                       Grammar::rule(t.arguments ? *t.arguments : json.any_object()), json.ws(), special("<|call|>")});
  if (g.alternatives(answer).empty()) throw InputError("the turn allows no answer: neither a final message nor a tool");
  const int r = g.declare("turn");
  if (turn.analysis)
    g.add_alternative(r, {special("<|channel|>"), text("analysis"), special("<|message|>"), g.loop(any_text()),
                          special("<|end|>"), special("<|start|>"), text("assistant"), Grammar::rule(answer)});
  g.add_alternative(r, {Grammar::rule(answer)});
  return r;
}

}  // namespace tps
