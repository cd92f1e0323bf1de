/* Constant padding of an image's height and width (ONNX's Pad in constant mode, PyTorch's
 * F.pad(x, (left, right, top, bottom), value=v)): out is the input framed by `top`,
 * `left`, `bottom`, `right` rows and columns of v. NCHW. The loops are written once over
 * an element's load and store, for fp32 and bf16 alike. */
#ifndef DTRAIN_PAD2D_H
#define DTRAIN_PAD2D_H

#include <stdint.h>

void dt_pad2d_forward(float *out,      /* [n, c, h + top + bottom, w + left + right] */
                      const float *in, /* [n, c, h, w] */
                      int n, int c, int h, int w, const int pads[4], float value);
/* Accumulates (+=) the interior of dout into din (add 0: writes it). */
void dt_pad2d_backward(float *din, const float *dout, int n, int c, int h, int w, const int pads[4],
                       int add);

void dt_bf16_pad2d_forward(uint16_t *out, const uint16_t *in, int n, int c, int h, int w,
                           const int pads[4], float value);
void dt_bf16_pad2d_backward(uint16_t *din, const uint16_t *dout, int n, int c, int h, int w,
                            const int pads[4], int add);

#endif
