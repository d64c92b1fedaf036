// A request's stop strings (chat's `stop`, the Messages API's
// `stop_sequences`) over the text an answer shows, piece by piece: the text
// before the first stop string found is passed on, the end that may be the
// start of one is held back until the next piece says, and once one is
// found nothing more passes. Shared so that every API stops the same way.
#pragma once

#include <string>
#include <vector>

namespace tps {

class StopStrings {
 public:
  explicit StopStrings(std::vector<std::string> stop) : stop_(std::move(stop)) {}

  // The part of `text` (after what was held back) that is sure to show.
  std::string push(const std::string& text);
  // The end of the answer: what was held back, unless a stop string was found.
  std::string flush();
  bool stopped() const { return !found_.empty(); }
  const std::string& found() const { return found_; }  // the stop string that ended the text ("": none)

 private:
  std::vector<std::string> stop_;
  std::string held_, found_;
};

}  // namespace tps
