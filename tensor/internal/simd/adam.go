package simd

// AdamConsts are the per-step constants of AdamF32's kernel, in its order.
type AdamConsts struct{ B1, Omb1, B2, Omb2, InvBc2, Eps, Step float32 }
