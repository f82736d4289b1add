#include "util/stop_signal.h"

#include <signal.h>
#include <string.h>

#include "util/check.h"

static volatile sig_atomic_t received = 0;

static void on_stop(int sig) {
    if (received == SIGINT && sig == SIGINT) {
        /* A second Ctrl-C: the user wants out now, checkpoint or not. */
        signal(SIGINT, SIG_DFL);
        raise(SIGINT);
        return;
    }
    if (!received) received = sig;
}

void hs_stop_signals_install(void) {
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART; /* blocking calls (MPI progress, reads) continue; the flag is polled */
    const int sigs[] = {SIGTERM, SIGINT, SIGUSR1};
    for (int i = 0; i < 3; i++)
        if (sigaction(sigs[i], &sa, NULL) != 0) HS_FATAL("cannot install the stop-signal handlers", "sigaction");
}

int hs_stop_signal(void) { return received; }
