/* Softmax cross-entropy averaged over the batch, as torch.nn.CrossEntropyLoss. */
#ifndef DTRAIN_CROSS_ENTROPY_H
#define DTRAIN_CROSS_ENTROPY_H

#include <stdint.h>

/* Returns the mean loss; writes softmax probabilities to probs [n, classes] and, if
 * correct is not NULL, the number of rows whose argmax equals the label. Labels must
 * lie in [0, classes). */
double dt_cross_entropy_forward(float *probs, const float *logits, const int32_t *labels, int n,
                                int classes, int *correct);

/* Accumulates d(mean loss)/d(logits) = (probs - onehot) / n into dlogits. */
void dt_cross_entropy_backward(float *dlogits, const float *probs, const int32_t *labels, int n,
                               int classes);

#endif
