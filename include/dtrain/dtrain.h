/* dtrain's public API, all of it: a program embedding dtrain includes this one
 * header (the others in include/dtrain/ are what it is made of; every other header
 * is internal, in src/<area>/, and not installed). */
/* area: train */
#ifndef DTRAIN_DTRAIN_H
#define DTRAIN_DTRAIN_H

#include "dtrain/activation.h"
#include "dtrain/backend.h"
#include "dtrain/checkpoint.h"
#include "dtrain/dataset.h"
#include "dtrain/dtype.h"
#include "dtrain/error.h"
#include "dtrain/evaluate.h"
#include "dtrain/kernel.h"
#include "dtrain/lr_schedule.h"
#include "dtrain/model.h"
#include "dtrain/op.h"
#include "dtrain/safetensors.h"
#include "dtrain/sgd.h"
#include "dtrain/train_state.h"
#include "dtrain/transform.h"
#include "dtrain/version.h"
#include "dtrain/world.h"
#include "dtrain/zoo.h"

#endif
