// The cells a sweep is running right now, kept in a file (`audit --out DIR`
// writes DIR/in_flight.txt).  A case that takes the GPU down with it (the
// H200 needed a full-chip reset after libtorch sweeps, run 8) leaves no
// verdict: the process hangs or is killed, and which of the jobs' cases did
// it is lost with it.  The file is rewritten (atomically) as cells start and
// finish, so after a kill it names the cells that were running, each with
// the `--cells` slot that runs it alone; a cell whose outcome the GPU's loss
// took stays listed.  A sweep that ends normally leaves the list empty.
#pragma once
#include <cstdint>
#include <map>
#include <mutex>
#include <string>

namespace afz {

class InFlightLog {
 public:
  // path "": no file, every call does nothing.
  InFlightLog(std::string path, std::string header);
  // A case (its sweep index: unique, ordered) starts or ends; `line` says
  // how to run it alone ("--cells 8812-8813  cell 1234: row x class case 0").
  void started(int64_t index, const std::string& line);
  void finished(int64_t index);
  // The text the file holds now (also without a file).
  std::string text() const;

 private:
  std::string format_locked() const;
  void write_locked() const;
  std::string path_, header_;
  mutable std::mutex mu_;
  std::map<int64_t, std::string> running_;
};

}  // namespace afz
