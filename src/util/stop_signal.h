/* Stop requests from the scheduler or the user: SIGTERM (Slurm's time limit, scancel, mpirun's
 * forwarding of its own SIGTERM), SIGINT (Ctrl-C) and SIGUSR1 (Slurm's --signal=B:USR1@120, forwarded by
 * mpirun) only set a flag; the trainer agrees on it across ranks at the next update boundary, writes a
 * checkpoint and exits with HS_EXIT_STOPPED. A second SIGINT ends the process at once. */
#ifndef HS_UTIL_STOP_SIGNAL_H
#define HS_UTIL_STOP_SIGNAL_H

/* Install the handlers (training only; prep and eval keep the default actions). */
void hs_stop_signals_install(void);
/* The first stop signal received (SIGTERM, SIGINT or SIGUSR1), or 0. */
int hs_stop_signal(void);

#endif
