/* The setup `hetseq train` and `hetseq eval` share (see setup.h). */
#include "train/setup.h"

const hs_backend *hs_setup_backend(const hs_train_config *tc, const hs_comm *comm) {
    return hs_backend_with_precision(hs_backend_select(tc->device, comm->local_rank), tc->precision);
}

hs_task *hs_setup_task(const hs_train_config *tc, const hs_comm *comm, const hs_backend *be) {
    return hs_task_create(&tc->task, comm, be);
}
