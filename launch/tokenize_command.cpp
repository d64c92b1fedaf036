#include "launch/tokenize_command.h"

#include <cstdio>
#include <nlohmann/json.hpp>

#include "engine/gguf/gguf_reader.h"
#include "engine/text/tokenizer.h"
#include "launch/json_output.h"
#include "runtime/error.h"
#include "runtime/mapped_file.h"

namespace tps {

CLI::App* add_tokenize_command(CLI::App& app, TokenizeOptions& tk) {
  CLI::App* tokenize =
      app.add_subcommand("tokenize", "print the token ids (and pieces) of a text with the model's tokenizer");
  tokenize->add_option("-m,--model", tk.model, "GGUF model file")->required();
  auto* text = tokenize->add_option("--text", tk.text, "text to tokenize");
  tokenize->add_option("--file", tk.file, "file whose contents to tokenize")->excludes(text);
  tokenize->add_flag("--json", tk.json, "print {\"ids\": [...], \"pieces\": [...]}");
  tokenize->add_flag("--ids-only", tk.ids_only, "print only the ids, as a list");
  tokenize->add_flag("!--no-parse-special", tk.parse_special,
                     "treat <|start|> and other control-token text as plain text");
  return tokenize;
}

int run_tokenize(const TokenizeOptions& o) {
  if (o.text.empty() && o.file.empty()) throw InputError("tokenize: give --text TEXT or --file FILE");
  std::string text = o.text;
  if (!o.file.empty()) text = read_text_file(o.file);
  GgufFile file = GgufFile::open(o.model);
  Tokenizer tok = Tokenizer::from_gguf(file);
  std::vector<int32_t> ids = tok.encode(text, o.parse_special);
  if (o.json) {
    nlohmann::json j = {{"ids", ids}, {"pieces", nlohmann::json::array()}};
    for (int32_t id : ids) j["pieces"].push_back(tok.token_bytes(id));
    // Pieces may be partial UTF-8 (a character split across tokens).
    print_json(j);
  } else if (o.ids_only) {
    std::string line = "[";
    for (size_t i = 0; i < ids.size(); ++i) line += cat(i ? ", " : "", ids[i]);
    std::printf("%s]\n", line.c_str());
  } else {
    for (int32_t id : ids) {
      const std::string piece = json_text(tok.token_bytes(id));
      std::printf("%6d -> %s\n", id, piece.c_str());
    }
  }
  return 0;
}

}  // namespace tps
