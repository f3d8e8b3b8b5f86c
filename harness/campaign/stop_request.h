// A polite stop: SIGINT or SIGTERM (a CI job's timeout, a Ctrl-C) asks a
// running campaign or audit to stop at its next case boundary and write its
// report, so nothing already found is lost.  A second signal is not polite:
// the handler has restored the default action, and it ends the process.
#pragma once

namespace afz {

// Installs the handlers (idempotent).  Commands that write reports call it.
void install_stop_handlers();
// True once a stop was asked for (by a signal or request_stop()).
bool stop_requested();
// What a signal does, for tests and for callers that stop on their own terms.
void request_stop();
void clear_stop_request();

}  // namespace afz
