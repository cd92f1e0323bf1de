/* Monotonic wall-clock time in seconds. */
#ifndef DTRAIN_TIMER_H
#define DTRAIN_TIMER_H

double dt_now(void);

#endif
