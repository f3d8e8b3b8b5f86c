// The cells a sweep is running right now, kept in a file (`audit --out DIR`
// writes DIR/in_flight.txt).  A case that takes the GPU down with it (the
// H200 needed a full-chip reset after libtorch sweeps, run 8) leaves no
// verdict: the process hangs or is killed, and which of the jobs' cases did
// it is lost with it.  The file is rewritten (atomically) as cells start and
// finish, so after a kill it names the cells that were running, each with
// the `--cells` slot that runs it alone; a cell whose outcome the GPU's loss
// took stays listed.  A sweep that ends normally leaves the list empty.
// A history file (DIR/in_flight_history.txt) keeps every start and end with
// its UTC time to the microsecond, to line up with the driver's log (`dmesg
// --time-format iso`): the Xid that precedes a reset names its moment, the
// history the cases running then.
#pragma once
#include <cstdint>
#include <cstdio>
#include <map>
#include <mutex>
#include <string>

namespace afz {

class InFlightLog {
 public:
  // path "": no file, every call does nothing; history_path "": no history.
  InFlightLog(std::string path, std::string header, std::string history_path = "");
  ~InFlightLog();
  InFlightLog(const InFlightLog&) = delete;  // owns the history's FILE*
  InFlightLog& operator=(const InFlightLog&) = delete;
  // A case (its sweep index: unique, ordered) starts or ends; `line` says
  // how to run it alone ("--cells 8812-8813  cell 1234: row x class case 0").
  void started(int64_t index, const std::string& line);
  void finished(int64_t index);
  // The text the file holds now (also without a file).
  std::string text() const;

 private:
  std::string format_locked() const;
  void write_locked() const;
  void append_history_locked(const char* event, const std::string& line);
  std::string path_, header_;
  std::FILE* history_ = nullptr;
  mutable std::mutex mu_;
  std::map<int64_t, std::string> running_;
};

}  // namespace afz
