"""Moves the Step-TP reference makes (issue 14), written by hand from the patterns its outputs
show, that our engine must make too -- compared in the canonical form, so the names the
reference would give its new tensors and indices do not matter -- and the moves it makes that
are unsound in general, which we must refuse.

benchmarks/reference_recall.py measures the same over whole corpora against the reference
itself; these pin a handful per strategy without needing its checkout.
"""

from __future__ import annotations

import pytest

from leir_egraph.egraph import single_steps
from leir_egraph.leir import Program
from leir_egraph.leir.canonical import canonical_text, exact_canonical_text
from leir_egraph.leir.signature import Signature

MATMUL = ("B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}"
          "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];")
MATMUL_SIG = "A:f32[4,8] C:f32[8,6] -> D:f32[4,6]"
ROWMAX = "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
ROWMAX_SIG = "A:f32[4,8] -> D:f32[4]"
TWO_STAGE = ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a});];"
             "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,a};];")
TWO_STAGE_SIG = "A:f32[4,8] -> C:f32[4,8]"

HUBER = ("B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=abs(A^{f32,g}_{tx,a}-C^{f32,g}_{tx,a})-0.5;];"
         "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=if_then_else(abs(A^{f32,g}_{tx,a}"
         "-C^{f32,g}_{tx,a})<1,A^{f32,g}_{tx,a},F^{f32,g}_{tx,a});];")
HUBER_SIG = "A:f32[4,8] C:f32[4,8] -> D:f32[4,8]"
TANH2 = ("B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,g}_{tx,a}=exp(H^{f32,g}_{tx,a})-exp(-H^{f32,g}_{tx,a});];"
         "B^{4}_{tx=0}L^{8}_{a=0}[K^{f32,g}_{tx,a}=exp(H^{f32,g}_{tx,a})+exp(-H^{f32,g}_{tx,a});];"
         "B^{4}_{tx=0}L^{8}_{a=0}[M^{f32,g}_{tx,a}=H^{f32,g}_{tx,a}*J^{f32,g}_{tx,a}/K^{f32,g}_{tx,a};];"
         "B^{4}_{tx=0}L^{8}_{a=0}[O^{f32,g}_{tx,a}=exp(M^{f32,g}_{tx,a})-exp(-M^{f32,g}_{tx,a});];"
         "B^{4}_{tx=0}L^{8}_{a=0}[Q^{f32,g}_{tx,a}=exp(M^{f32,g}_{tx,a})+exp(-M^{f32,g}_{tx,a});];"
         "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=M^{f32,g}_{tx,a}*O^{f32,g}_{tx,a}/Q^{f32,g}_{tx,a};];")
TANH2_SIG = "H:f32[4,8] -> C:f32[4,8]"

# (strategy, before, signature, a reference-style after)
MOVES = [
    # layout_transformation: the transposed copy is bound to threads (its first loop -> B tx)
    ("layout_transformation", MATMUL, MATMUL_SIG,
     "B^{6}_{tx=0}L^{8}_{c=0}[E^{f32,g}_{tx,c}=C^{f32,g}_{c,tx};];"
     "B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}"
     "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*E^{f32,g}_{a,c};];"),
    # ... the flattened copy bound the same way, read at c*6+a
    ("layout_transformation", MATMUL, MATMUL_SIG,
     "B^{6}_{tx=0}L^{8}_{c=0}[E^{f32,g}_{c*6+tx}=C^{f32,g}_{c,tx};];"
     "B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}"
     "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*E^{f32,g}_{c*6+a};];"),
    # ... a split copy F_{tx,f,a}=A_{tx,f*4+a}, read back at a//4, a%4
    ("layout_transformation", ROWMAX, ROWMAX_SIG,
     "B^{4}_{tx=0}L^{2}_{f=0}L^{4}_{a=0}[F^{f32,g}_{tx,f,a}=A^{f32,g}_{tx,f*4+a};];"
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},F^{f32,g}_{tx,a//4,a%4});];"),
    # ... a split of the bound dimension: outer L, inner B
    ("layout_transformation", ROWMAX, ROWMAX_SIG,
     "L^{2}_{f=0}B^{2}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{f,tx,a}=A^{f32,g}_{f*2+tx,a};];"
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},F^{f32,g}_{tx//2,tx%2,a});];"),
    # set_storage_layout: loop-first flattening D_{tx,a} -> D_{a*4+tx}
    ("set_storage_layout", TWO_STAGE, TWO_STAGE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{a*4+tx}=exp(A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{a*4+tx}+A^{f32,g}_{tx,a};];"),
    # precompute_indices: the index table computed by threads (its first loop -> B tx)
    ("precompute_indices",
     "B^{8}_{tx=0}L^{8}_{a=0}L^{1}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,a*1+c};];",
     "A:f32[8,8] -> D:f32[8,8]",
     "B^{8}_{tx=0}L^{1}_{c=0}[K^{i64,g}_{tx,c}=tx*1+c;];B^{8}_{tx=0}L^{8}_{a=0}L^{1}_{c=0}"
     "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,K^{i64,g}_{a,c}};];"),
    # loop_unrolling / loop_parallelization: a loop of one iteration marked U / P (no-ops)
    ("loop_unrolling",
     "B^{8}_{tx=0}L^{1}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c}/8;];",
     "A:f32[8,1,8] -> D:f32[8,1,8]",
     "B^{8}_{tx=0}U^{1}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c}/8;];"),
    ("loop_parallelization",
     "B^{8}_{tx=0}L^{1}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c}/8;];",
     "A:f32[8,1,8] -> D:f32[8,1,8]",
     "B^{8}_{tx=0}P^{1}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c}/8;];"),
    # compute_inline: a producer writing at a compound index, each element once
    ("compute_inline",
     "B^{2}_{tx=0}L^{2}_{a=0}L^{4}_{c=0}[S^{f32,g}_{tx,a*4+c}=A^{f32,g}_{tx,a*4+c}-M^{f32,g}_{tx,a};];"
     "B^{2}_{tx=0}L^{2}_{a=0}L^{4}_{c=0}[G^{f32,g}_{tx,a*4+c}=K^{f32,g}_{a*4+c}*S^{f32,g}_{tx,a*4+c};];",
     "A:f32[2,8] M:f32[2,2] K:f32[8] -> G:f32[2,8]",
     "B^{2}_{tx=0}L^{2}_{a=0}L^{4}_{c=0}"
     "[G^{f32,g}_{tx,a*4+c}=K^{f32,g}_{a*4+c}*(A^{f32,g}_{tx,a*4+c}-M^{f32,g}_{tx,a});];"),
    # ... and a scalar computed in a loop of one iteration
    ("compute_inline",
     "B^{1}_{tx=0}[S^{f64,g}=exp(R^{f64,g});];B^{1}_{tx=0}[W^{f64,g}=1.0/S^{f64,g};];",
     "R:f64[] -> W:f64[]", "B^{1}_{tx=0}[W^{f64,g}=1.0/exp(R^{f64,g});];"),
    # loop_vectorization: V on a short outer loop of a reduction nest
    ("loop_vectorization",
     "B^{8}_{tx=0}L^{3}_{a=0}L^{6}_{c=0}"
     "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];",
     "A:f32[8,6] C:f32[6,3] -> D:f32[8,3]",
     "B^{8}_{tx=0}V^{3}_{a=0}L^{6}_{c=0}"
     "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"),
    # additive_split: the neighbouring element added and subtracted
    ("additive_split", TWO_STAGE, TWO_STAGE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}"
     "+if_then_else(a-1<0,0,A^{f32,g}_{tx,a-1})-if_then_else(a-1<0,0,A^{f32,g}_{tx,a-1}));];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,a};];"),
    # ... an operand of the equation added first, x+m-m
    ("additive_split", TWO_STAGE, TWO_STAGE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,a}"
     "-A^{f32,g}_{tx,a}+A^{f32,g}_{tx,a};];"),
    # multiplicative_split: divided and multiplied by the earlier (positive) result
    ("multiplicative_split", TWO_STAGE, TWO_STAGE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}"
     "+A^{f32,g}_{tx,a}/D^{f32,g}_{tx,a}*D^{f32,g}_{tx,a};];"),
    # ... by the neighbouring element of a positive tensor, 1 before the first
    ("multiplicative_split", TWO_STAGE, TWO_STAGE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}"
     "/if_then_else(a-1<0,1,D^{f32,g}_{tx,a-1})*if_then_else(a-1<0,1,D^{f32,g}_{tx,a-1})"
     "+A^{f32,g}_{tx,a};];"),
    # expression_splitting: a batch norm's denominator over c alone, its nest bound as tx
    ("expression_splitting",
     "L^{2}_{a=0}L^{3}_{c=0}L^{2}_{d=0}B^{4}_{tx=0}[F^{f32,g}_{a,c,d,tx}=(A^{f32,g}_{a,c,d,tx}"
     "-D^{f32,g}_{c})/sqrt(E^{f32,g}_{c}+1e-05);];", "A:f32[2,3,2,4] D:f32[3] E:f32[3] -> F:f32[2,3,2,4]",
     "B^{3}_{tx=0}[K^{f32,g}_{tx}=sqrt(E^{f32,g}_{tx}+1e-05);];L^{2}_{a=0}L^{3}_{c=0}L^{2}_{d=0}"
     "B^{4}_{tx=0}[F^{f32,g}_{a,c,d,tx}=(A^{f32,g}_{a,c,d,tx}-D^{f32,g}_{c})/K^{f32,g}_{c};];"),
    # ... a pooling divisor computed from the index alone, the index renamed where read as a value
    ("expression_splitting",
     "B^{4}_{tx=0}L^{8}_{c=0}[C^{f32,g}_{tx,c}=A^{f32,g}_{tx,c}/(min(2,16-c*2)+2);];",
     "A:f32[4,8] -> C:f32[4,8]",
     "B^{8}_{tx=0}[F^{f32,g}_{tx}=min(2,16-tx*2);];"
     "B^{4}_{tx=0}L^{8}_{c=0}[C^{f32,g}_{tx,c}=A^{f32,g}_{tx,c}/(F^{f32,g}_{c}+2);];"),
    # common_subexpression_elimination: a Huber loss's abs(A-C), a value in one nest and an
    # operand of the f32 comparison in the next
    ("common_subexpression_elimination", HUBER, HUBER_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[Q^{f32,g}_{tx,a}=abs(A^{f32,g}_{tx,a}-C^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=Q^{f32,g}_{tx,a}-0.5;];"
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=if_then_else(Q^{f32,g}_{tx,a}<1,"
     "A^{f32,g}_{tx,a},F^{f32,g}_{tx,a});];"),
    # ... every repeated exp(...) of two written-out tanh shared at once, each before its own
    # first use (Mish of Mish)
    ("common_subexpression_elimination", TANH2, TANH2_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[R^{f32,g}_{tx,a}=exp(H^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,g}_{tx,a}=R^{f32,g}_{tx,a}-exp(-H^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[K^{f32,g}_{tx,a}=R^{f32,g}_{tx,a}+exp(-H^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[M^{f32,g}_{tx,a}=H^{f32,g}_{tx,a}*J^{f32,g}_{tx,a}/K^{f32,g}_{tx,a};];"
     "B^{4}_{tx=0}L^{8}_{a=0}[S^{f32,g}_{tx,a}=exp(M^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[O^{f32,g}_{tx,a}=S^{f32,g}_{tx,a}-exp(-M^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[Q^{f32,g}_{tx,a}=S^{f32,g}_{tx,a}+exp(-M^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=M^{f32,g}_{tx,a}*O^{f32,g}_{tx,a}/Q^{f32,g}_{tx,a};];"),
]

SOFTMAX_SUM = ("B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
               "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}"
               "+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];")

# reference moves that are unsound in general: a standard-normal input may be 0, so dividing
# by its neighbour can make 0/0
# expression_splitting: the reference writes the new intermediate over the frame loops reversed,
# subscripted in that order
MOVES += [
    ("expression_splitting", MATMUL, MATMUL_SIG,
     "L^{8}_{c=0}L^{6}_{a=0}B^{4}_{tx=0}[E^{f32,g}_{c,a,tx}=A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"
     "B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+E^{f32,g}_{c,a,tx};];"),
    ("expression_splitting", "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a})*2;];",
     "A:f32[4,8] -> C:f32[4,8]",
     "L^{8}_{a=0}B^{4}_{tx=0}[D^{f32,g}_{a,tx}=exp(A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{a,tx}*2;];"),
]

# additive_split: the whole right-hand side split after its last term, also by itself
MOVES += [
    ("additive_split", "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}+D^{f32,g}_{tx,a};];",
     "A:f32[4,8] D:f32[4,8] -> E:f32[4,8]",
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}+D^{f32,g}_{tx,a}"
     "+A^{f32,g}_{tx,a}-A^{f32,g}_{tx,a};];"),
    ("additive_split", "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=A^{f32,g}_{a,tx};];",
     "A:f32[8,4] -> E:f32[4,8]",
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=A^{f32,g}_{a,tx}+A^{f32,g}_{a,tx}-A^{f32,g}_{a,tx};];"),
]

# operator_fusion: the producer's intermediate kept in shared memory of the fused kernel
THREE = ("B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
         "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx,a}=1-J^{f32,g}_{tx,a};];"
         "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=max(E^{f32,g}_{tx,a},0);];")
THREE_SIG = "A:f32[4,8] -> F:f32[4,8]"
MOVES += [
    ("operator_fusion", THREE, THREE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,s}_{tx,a}=1-J^{f32,g}_{tx,a};"
     "F^{f32,g}_{tx,a}=max(E^{f32,s}_{tx,a},0);];"),
    # the reference picks shared or local memory at random: local too
    ("operator_fusion", THREE, THREE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,l}_{tx,a}=A^{f32,g}_{tx,a}*2;"
     "E^{f32,g}_{tx,a}=1-J^{f32,l}_{tx,a};];"
     "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=max(E^{f32,g}_{tx,a},0);];"),
]

# tensor_split along the only reduction loop, as the reference writes it: the inputs copied
# into two parts over all the nest's loops, two partial reductions, then their combination
MOVES += [
    ("tensor_split_to_decouple_operators",
     "B^{16}_{tx=0}L^{16}_{a=0}L^{16}_{c=0}[D^{f32,g}_{tx,c}=min(D^{f32,g}_{tx,c},A^{f32,g}_{tx,a,c});];",
     "A:f32[16,16,16] -> D:f32[16,16]",
     "B^{16}_{tx=0}L^{1}_{a=0}L^{16}_{c=0}[I^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a,c};];"
     "B^{16}_{tx=0}L^{15}_{a=0}L^{16}_{c=0}[J^{f32,g}_{tx,a,c}=A^{f32,g}_{tx,a+1,c};];"
     "B^{16}_{tx=0}L^{1}_{a=0}L^{16}_{c=0}[K^{f32,g}_{tx,c}=min(K^{f32,g}_{tx,c},I^{f32,g}_{tx,a,c});];"
     "B^{16}_{tx=0}L^{15}_{a=0}L^{16}_{c=0}[M^{f32,g}_{tx,c}=min(M^{f32,g}_{tx,c},J^{f32,g}_{tx,a,c});];"
     "B^{16}_{tx=0}L^{16}_{c=0}[D^{f32,g}_{tx,c}=min(D^{f32,g}_{tx,c},min(K^{f32,g}_{tx,c},M^{f32,g}_{tx,c}));];"),
]

# the online family as the reference writes it: the scan position where the reduction loop is
# in the nest's loop order, and (where the scanned value is never -inf, here after a ReLU) the
# running sum without the -inf cases, the maximum's readers redirected to its scan
RELU = "B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[F^{f32,g}_{tx,a,c}=max(A^{f32,g}_{tx,a,c},0);];"
SOFTMAX_MID = ("B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx,c}=max(D^{f32,g}_{tx,c},F^{f32,g}_{tx,a,c});];"
               "B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[E^{f32,g}_{tx,c}=E^{f32,g}_{tx,c}"
               "+exp(F^{f32,g}_{tx,a,c}-D^{f32,g}_{tx,c});];"
               "B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[G^{f32,g}_{tx,a,c}=exp(F^{f32,g}_{tx,a,c}"
               "-D^{f32,g}_{tx,c})/E^{f32,g}_{tx,c};];")
SOFTMAX_MID_SIG = "A:f32[4,3,5] -> G:f32[4,3,5]"
SCANS_MID = ("B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx,a,c}=max(if_then_else(a-1<0,-inf,"
             "D^{f32,g}_{tx,a-1,c}),F^{f32,g}_{tx,a,c});H^{f32,g}_{tx,a,c}=if_then_else(a-1<0,1,"
             "H^{f32,g}_{tx,a-1,c})*exp(if_then_else(a-1<0,-inf,D^{f32,g}_{tx,a-1,c})"
             "-D^{f32,g}_{tx,a,c})+exp(F^{f32,g}_{tx,a,c}-D^{f32,g}_{tx,a,c});];")
MOVES += [
    ("normal_loop_max_to_prefix_max",
     "B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[D^{f32,g}_{tx,c}=max(D^{f32,g}_{tx,c},A^{f32,g}_{tx,a,c});];",
     "A:f32[4,3,5] -> D:f32[4,5]",
     "B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[E^{f32,g}_{tx,a,c}=max(if_then_else(a-1<0,-inf,"
     "E^{f32,g}_{tx,a-1,c}),A^{f32,g}_{tx,a,c});];"
     "B^{4}_{tx=0}L^{5}_{c=0}[D^{f32,g}_{tx,c}=E^{f32,g}_{tx,2,c};];"),
    ("online_softmax", RELU + SOFTMAX_MID, SOFTMAX_MID_SIG,
     RELU + SCANS_MID + "B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[G^{f32,g}_{tx,a,c}=exp(F^{f32,g}_{tx,a,c}"
     "-D^{f32,g}_{tx,2,c})/H^{f32,g}_{tx,2,c};];"),
    ("normal_loop_summation_on_exp_to_prefix_summation_on_exp", RELU + SOFTMAX_MID, SOFTMAX_MID_SIG,
     RELU + SCANS_MID + "B^{4}_{tx=0}L^{5}_{c=0}[E^{f32,g}_{tx,c}=H^{f32,g}_{tx,2,c};];"
     "B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[G^{f32,g}_{tx,a,c}=exp(F^{f32,g}_{tx,a,c}"
     "-D^{f32,g}_{tx,2,c})/E^{f32,g}_{tx,c};];"),
]

# tensor_concat with the reference's grouped copies: one nest copies every input of the first
# nest, one every input of the second, and the copy-back runs over all the loops
MOVES += [
    ("tensor_concat_to_fuse_operators",
     "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx}=F^{f32,g}_{tx}+(A^{f32,g}_{tx,a}-C^{f32,g}_{tx,a})**2;];"
     "B^{4}_{tx=0}L^{8}_{a=0}[G^{f32,g}_{tx}=G^{f32,g}_{tx}+(A^{f32,g}_{tx,a}-D^{f32,g}_{tx,a})**2;];",
     "A:f32[4,8] C:f32[4,8] D:f32[4,8] -> F:f32[4] G:f32[4]",
     "B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,g}_{tx,a}=A^{f32,g}_{tx,a};K^{f32,g}_{tx,a}=C^{f32,g}_{tx,a};];"
     "B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,g}_{tx+4,a}=A^{f32,g}_{tx,a};K^{f32,g}_{tx+4,a}=D^{f32,g}_{tx,a};];"
     "B^{8}_{tx=0}L^{8}_{a=0}[M^{f32,g}_{tx}=M^{f32,g}_{tx}+(J^{f32,g}_{tx,a}-K^{f32,g}_{tx,a})**2;];"
     "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx}=M^{f32,g}_{tx};];"
     "B^{4}_{tx=0}L^{8}_{a=0}[G^{f32,g}_{tx}=M^{f32,g}_{tx+4};];"),
    # ... two batched matmuls sharing C, grouped in the other order (C's copy first)
    ("tensor_concat_to_fuse_operators",
     "B^{2}_{tx=0}L^{3}_{a=0}L^{3}_{c=0}L^{4}_{d=0}[E^{f32,g}_{tx,a,c}=E^{f32,g}_{tx,a,c}"
     "+A^{f32,g}_{tx,a,d}*C^{f32,g}_{tx,d,c};];"
     "B^{2}_{tx=0}L^{3}_{a=0}L^{3}_{c=0}L^{4}_{d=0}[F^{f32,g}_{tx,a,c}=F^{f32,g}_{tx,a,c}"
     "+D^{f32,g}_{tx,a,d}*C^{f32,g}_{tx,d,c};];",
     "A:f32[2,3,4] C:f32[2,4,3] D:f32[2,3,4] -> E:f32[2,3,3] F:f32[2,3,3]",
     "B^{2}_{tx=0}L^{3}_{a=0}L^{3}_{c=0}L^{4}_{d=0}[H^{f32,g}_{tx,d,c}=C^{f32,g}_{tx,d,c};"
     "I^{f32,g}_{tx,a,d}=A^{f32,g}_{tx,a,d};];"
     "B^{2}_{tx=0}L^{3}_{a=0}L^{3}_{c=0}L^{4}_{d=0}[H^{f32,g}_{tx+2,d,c}=C^{f32,g}_{tx,d,c};"
     "I^{f32,g}_{tx+2,a,d}=D^{f32,g}_{tx,a,d};];"
     "B^{4}_{tx=0}L^{3}_{a=0}L^{3}_{c=0}L^{4}_{d=0}[J^{f32,g}_{tx,a,c}=J^{f32,g}_{tx,a,c}"
     "+I^{f32,g}_{tx,a,d}*H^{f32,g}_{tx,d,c};];"
     "B^{2}_{tx=0}L^{3}_{a=0}L^{3}_{c=0}L^{4}_{d=0}[E^{f32,g}_{tx,a,c}=J^{f32,g}_{tx,a,c};];"
     "B^{2}_{tx=0}L^{3}_{a=0}L^{3}_{c=0}L^{4}_{d=0}[F^{f32,g}_{tx,a,c}=J^{f32,g}_{tx+2,a,c};];"),
]

# reduction_factorization in the reference's form: partial results with the output's own
# subscripts, combined over every other loop (sound where those loops run once)
POINTWISE = ("B^{2}_{tx=0}L^{2}_{a=0}L^{3}_{f=0}L^{1}_{g=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}"
             "+D^{f32,g}_{a,f,g}*A^{f32,g}_{tx,f+g};];")
POINTWISE_SIG = "A:f32[2,3] D:f32[2,3,1] -> C:f32[2,2]"
MOVES += [
    ("reduction_factorization", POINTWISE, POINTWISE_SIG,
     "B^{2}_{tx=0}L^{2}_{a=0}L^{2}_{f=0}L^{1}_{g=0}[E^{f32,g}_{tx,a}=E^{f32,g}_{tx,a}"
     "+D^{f32,g}_{a,f,g}*A^{f32,g}_{tx,f+g};];"
     "B^{2}_{tx=0}L^{2}_{a=0}L^{1}_{f=0}L^{1}_{g=0}[F^{f32,g}_{tx,a}=F^{f32,g}_{tx,a}"
     "+D^{f32,g}_{a,f+2,g}*A^{f32,g}_{tx,f+2+g};];"
     "B^{2}_{tx=0}L^{2}_{a=0}L^{1}_{g=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}"
     "+(E^{f32,g}_{tx,a}+F^{f32,g}_{tx,a});];"),
]

# loop_fusion is the reference's loop_split pairs reversed: from its split program (the loop
# of 6 as 2x3, read at a*3+f) back to the one loop
MOVES += [
    ("loop_fusion",
     "B^{4}_{tx=0}L^{2}_{a=0}L^{3}_{f=0}L^{8}_{c=0}[D^{f32,g}_{tx,a*3+f}="
     "D^{f32,g}_{tx,a*3+f}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a*3+f};];", MATMUL_SIG,
     "B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}"
     "[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"),
]

# expression_reorder of the reference's tensor_split output: two nests filling disjoint
# column ranges of one tensor (its concatenated halves) run in either order
MOVES += [
    ("expression_reorder",
     "L^{8}_{a=0}B^{1}_{tx=0}[F^{f32,g}_{a,tx}=exp(A^{f32,g}_{a,tx});];"
     "L^{8}_{a=0}B^{5}_{tx=0}[F^{f32,g}_{a,tx+1}=A^{f32,g}_{a,tx+1};];", "A:f32[8,6] -> F:f32[8,6]",
     "L^{8}_{a=0}B^{5}_{tx=0}[F^{f32,g}_{a,tx+1}=A^{f32,g}_{a,tx+1};];"
     "L^{8}_{a=0}B^{1}_{tx=0}[F^{f32,g}_{a,tx}=exp(A^{f32,g}_{a,tx});];"),
]

# loop_binding of a loop of one iteration, as the reference does (B^{1}_{bza=0})
MOVES += [
    ("loop_binding", "B^{8}_{tx=0}L^{1}_{a=0}L^{8}_{c=0}[E^{f32,g}_{tx,a,c}=D^{f32,g}_{tx,a,c}+H^{f32,g};];",
     "D:f32[8,1,8] H:f32[] -> E:f32[8,1,8]",
     "B^{8}_{tx=0}B^{1}_{bza=0}L^{8}_{c=0}[E^{f32,g}_{tx,bza,c}=D^{f32,g}_{tx,bza,c}+H^{f32,g};];"),
]

# additive_split of a whole right-hand side that adds onto values an earlier nest wrote (a bias
# after the nest that computed D): D=D+C+C-C reads D's written values, no initial value
MOVES += [
    ("additive_split",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+C^{f32,g}_{a};];",
     "A:f32[4,8] C:f32[8] -> D:f32[4,8]",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+C^{f32,g}_{a}"
     "+C^{f32,g}_{a}-C^{f32,g}_{a};];"),
    # exponential_split's quotient by the value the exponent subtracts: exp(x-r)/exp(r-r)
    ("exponential_split", SOFTMAX_SUM, "A:f32[4,8] -> E:f32[4]",
     SOFTMAX_SUM.replace("exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})",
                         "exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/exp(D^{f32,g}_{tx}-D^{f32,g}_{tx})")),
]

# operator_fusion of two scalar nests of one iteration, the intermediate in shared memory
MOVES += [
    ("operator_fusion",
     "B^{1}_{tx=0}[O^{f64,g}=2;];B^{1}_{tx=0}[Q^{f64,g}=sqrt(O^{f64,g});];"
     "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*Q^{f64,g};];", "A:f32[4] -> C:f32[4]",
     "B^{1}_{tx=0}[O^{f64,s}=2;Q^{f64,g}=sqrt(O^{f64,s});];"
     "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}*Q^{f64,g};];"),
]

# layout_transformation of a convolution window read: the split copy over the read's loops,
# the window subscript carried as it is (the reference's F_{tx,h,a,c*2+d*3}=D_{tx,h*4+a,c*2+d*3})
MOVES += [
    ("layout_transformation",
     "B^{16}_{tx=0}L^{16}_{a=0}L^{6}_{c=0}L^{4}_{d=0}"
     "[E^{f32,g}_{tx,a,c}=E^{f32,g}_{tx,a,c}+D^{f32,g}_{tx,a,c*2+d*3};];",
     "D:f32[16,16,20] -> E:f32[16,16,6]",
     "B^{16}_{tx=0}L^{4}_{h=0}L^{4}_{a=0}L^{6}_{c=0}L^{4}_{d=0}"
     "[F^{f32,g}_{tx,h,a,c*2+d*3}=D^{f32,g}_{tx,h*4+a,c*2+d*3};];"
     "B^{16}_{tx=0}L^{16}_{a=0}L^{6}_{c=0}L^{4}_{d=0}"
     "[E^{f32,g}_{tx,a,c}=E^{f32,g}_{tx,a,c}+F^{f32,g}_{tx,a//4,a%4,c*2+d*3};];"),
]

# the sympy family: sympy's function of a whole right-hand side (rules/math/sympy_forms.py), on
# layer norm's affine step; the variance Q is a sum of squares, so sqrt(Q+1e-05) is positive
NORM = ("B^{4}_{tx=0}L^{8}_{a=0}[Q^{f32,g}_{tx}=Q^{f32,g}_{tx}"
        "+(A^{f32,g}_{tx,a}-M^{f32,g}_{tx})**2/8;];"
        "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=G^{f32,g}_{a}*((A^{f32,g}_{tx,a}-M^{f32,g}_{tx})"
        "/sqrt(Q^{f32,g}_{tx}+1e-05))+H^{f32,g}_{a};];")
NORM_SIG = "A:f32[4,8] M:f32[4] G:f32[8] H:f32[8] -> C:f32[4,8]"
NORM_HEAD = NORM[:NORM.index("B^{4}_{tx=0}L^{8}_{a=0}[C")]
NORM_LOOPS = "B^{4}_{tx=0}L^{8}_{a=0}"
SQRT_V = "sqrt(Q^{f32,g}_{tx}+1.0e-5)"
SYMPY_MOVES = [
    ("collect", NORM, NORM_SIG,
     NORM_HEAD + NORM_LOOPS + "[C^{f32,g}_{tx,a}=G^{f32,g}_{a}*(A^{f32,g}_{tx,a}-M^{f32,g}_{tx})"
     "/" + SQRT_V + "+H^{f32,g}_{a};];"),
    # powsimp as sympy prints its result: x+x is 2*x, x/2.0 is 0.5*x
    ("powsimp", "B^{4}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx}+D^{f32,g}_{tx};];", "D:f32[4] -> C:f32[4]",
     "B^{4}_{tx=0}[C^{f32,g}_{tx}=2*D^{f32,g}_{tx};];"),
    ("powsimp", "B^{4}_{tx=0}[C^{f32,g}_{tx}=D^{f32,g}_{tx}/2.0;];", "D:f32[4] -> C:f32[4]",
     "B^{4}_{tx=0}[C^{f32,g}_{tx}=0.5*D^{f32,g}_{tx};];"),
]

SYMPY_REFUSED = [
    # expand_factorization of the variance's squared difference (the reference writes
    # Q=Q+A**2-2*A*M+M**2, ours would keep Q+(...)): where A is close to M, A-M is exact and
    # the expanded form rounds at the scale of A**2 -- 393 ULP of GroupNorm's output on the zoo;
    # defined_values refuses distributing over a sum that may cancel (docs/RULES.md section 10)
    ("expand_factorization", NORM, NORM_SIG,
     NORM_LOOPS + "[Q^{f32,g}_{tx}=Q^{f32,g}_{tx}+(A^{f32,g}_{tx,a}**2/8"
     "-A^{f32,g}_{tx,a}*M^{f32,g}_{tx}/4+M^{f32,g}_{tx}**2/8);];" + NORM[len(NORM_HEAD):]),
    # layer norm's affine step over a single fraction (the reference's cancellation and together):
    # on raw inputs G*(A-M) and H*sqrt(Q+eps) may overflow where G*((A-M)/sqrt(Q+eps))+H does
    # not, and a Q of inf gives (..+H*inf)/inf = NaN where the original gives H; the float
    # domain these strategies declare refuses them (SympyBounded, docs/RULES.md section 10)
    ("cancellation", NORM, NORM_SIG,
     NORM_HEAD + NORM_LOOPS + "[C^{f32,g}_{tx,a}=(A^{f32,g}_{tx,a}*G^{f32,g}_{a}"
     "-G^{f32,g}_{a}*M^{f32,g}_{tx}+H^{f32,g}_{a}*" + SQRT_V + ")/" + SQRT_V + ";];"),
    ("together", NORM, NORM_SIG,
     NORM_HEAD + NORM_LOOPS + "[C^{f32,g}_{tx,a}=(G^{f32,g}_{a}*(A^{f32,g}_{tx,a}-M^{f32,g}_{tx})"
     "+H^{f32,g}_{a}*" + SQRT_V + ")/" + SQRT_V + ";];"),
    # softmax's exp(x-max) split by sqf into exp(-max)*exp(x): exp(x) overflows, inf*0 is NaN
    ("factorization",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx});];",
     "A:f32[4,8] -> C:f32[4,8]",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=exp(-D^{f32,g}_{tx})*exp(A^{f32,g}_{tx,a});];"),
    # the sigmoid as exp(x)/(exp(x)+1): inf/inf for x above 89
    ("factorization", "B^{4}_{tx=0}[C^{f32,g}_{tx}=1/(1+exp(-A^{f32,g}_{tx}));];",
     "A:f32[4] -> C:f32[4]",
     "B^{4}_{tx=0}[C^{f32,g}_{tx}=exp(A^{f32,g}_{tx})/(exp(A^{f32,g}_{tx})+1);];"),
    # cancelling a divisor that may be zero: (A*A-E*E)/(A-E) is NaN at A=E, A+E is not
    ("cancellation",
     "B^{4}_{tx=0}[C^{f32,g}_{tx}=(A^{f32,g}_{tx}*A^{f32,g}_{tx}-E^{f32,g}_{tx}*E^{f32,g}_{tx})"
     "/(A^{f32,g}_{tx}-E^{f32,g}_{tx});];", "A:f32[4] E:f32[4] -> C:f32[4]",
     "B^{4}_{tx=0}[C^{f32,g}_{tx}=A^{f32,g}_{tx}+E^{f32,g}_{tx};];"),
]

REFUSED = [
    # reduction_factorization in the reference's form where another reduction loop runs twice:
    # the combining nest over it adds the partial results twice (C = 2 x the sum)
    ("reduction_factorization", POINTWISE.replace("L^{1}_{g=0}", "L^{2}_{g=0}").replace(
        "D:f32[2,3,1]", "D:f32[2,3,2]"),
     POINTWISE_SIG.replace("A:f32[2,3] D:f32[2,3,1]", "A:f32[2,4] D:f32[2,3,2]"),
     "B^{2}_{tx=0}L^{2}_{a=0}L^{2}_{f=0}L^{2}_{g=0}[E^{f32,g}_{tx,a}=E^{f32,g}_{tx,a}"
     "+D^{f32,g}_{a,f,g}*A^{f32,g}_{tx,f+g};];"
     "B^{2}_{tx=0}L^{2}_{a=0}L^{1}_{f=0}L^{2}_{g=0}[F^{f32,g}_{tx,a}=F^{f32,g}_{tx,a}"
     "+D^{f32,g}_{a,f+2,g}*A^{f32,g}_{tx,f+2+g};];"
     "B^{2}_{tx=0}L^{2}_{a=0}L^{2}_{g=0}[C^{f32,g}_{tx,a}=C^{f32,g}_{tx,a}"
     "+(E^{f32,g}_{tx,a}+F^{f32,g}_{tx,a});];"),
    # the reference's plain online sum where the scanned value may be -inf (a raw input): a row
    # that starts with -inf gives exp(-inf+inf)=NaN where the two-pass softmax is finite
    ("online_softmax", SOFTMAX_MID.replace("F^", "A^"), SOFTMAX_MID_SIG,
     SCANS_MID.replace("F^", "A^") + "B^{4}_{tx=0}L^{3}_{a=0}L^{5}_{c=0}[G^{f32,g}_{tx,a,c}="
     "exp(A^{f32,g}_{tx,a,c}-D^{f32,g}_{tx,2,c})/H^{f32,g}_{tx,2,c};];"),
    # operator_fusion into shared memory of an intermediate a later kernel still reads, and of
    # the program's output: shared memory does not outlive the fused kernel
    ("operator_fusion", THREE.replace("max(E^{f32,g}_{tx,a},0)",
                                      "max(E^{f32,g}_{tx,a},0)+J^{f32,g}_{tx,a}"), THREE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,s}_{tx,a}=A^{f32,g}_{tx,a}*2;E^{f32,g}_{tx,a}=1-J^{f32,s}_{tx,a};];"
     "B^{4}_{tx=0}L^{8}_{a=0}[F^{f32,g}_{tx,a}=max(E^{f32,g}_{tx,a},0)+J^{f32,s}_{tx,a};];"),
    ("operator_fusion", THREE, THREE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[J^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*2;];"
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,s}_{tx,a}=1-J^{f32,g}_{tx,a};"
     "F^{f32,s}_{tx,a}=max(E^{f32,s}_{tx,a},0);];"),
    # additive_split of an accumulation's whole right-hand side: D=D+A*C+A-A is no accumulation
    # (docs/LEIR.md), it reads D before anything writes it
    ("additive_split", MATMUL, MATMUL_SIG,
     "B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}[D^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}"
     "+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a}+A^{f32,g}_{tx,c}-A^{f32,g}_{tx,c};];"),
    # cache_read_write: the reference accumulates into a local tensor in one kernel and copies it
    # out in the next; local (and shared) memory does not outlive its kernel (docs/LEIR.md,
    # CUDA), so the staged copy must stay inside the nest's kernel
    ("cache_read_write", MATMUL, MATMUL_SIG,
     "B^{4}_{tx=0}L^{6}_{a=0}L^{8}_{c=0}"
     "[E^{f32,l}_{tx,a}=E^{f32,l}_{tx,a}+A^{f32,g}_{tx,c}*C^{f32,g}_{c,a};];"
     "B^{4}_{tx=0}L^{6}_{a=0}[D^{f32,g}_{tx,a}=E^{f32,l}_{tx,a};];"),
    # the reference's quotient form of a longer difference: exp(A-D-D) -> exp(A-m)/exp(-(D-D)-m)
    # is exp(A+D-D-...) -- not exp(A-D-D) (here with m = D)
    ("exponential_split",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}"
     "+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx}-D^{f32,g}_{tx});];", "A:f32[4,8] -> E:f32[4]",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}"
     "+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})/exp(-(D^{f32,g}_{tx}-D^{f32,g}_{tx})-D^{f32,g}_{tx});];"),
    ("multiplicative_split", TWO_STAGE, TWO_STAGE_SIG,
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx,a}=exp(A^{f32,g}_{tx,a}"
     "/if_then_else(a-1<0,1,A^{f32,g}_{tx,a-1})*if_then_else(a-1<0,1,A^{f32,g}_{tx,a-1}));];"
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=D^{f32,g}_{tx,a}+A^{f32,g}_{tx,a};];"),
]

REFUSED += [
    # exponential_split of softmax's exp(A-D), A and D unbounded: ExpSafeOperand asks the range
    # analysis to bound every factor's argument, so the products are refused (exp(A-m) of the
    # neighbour m overflows at large inputs where exp(A-D) does not; exp(D-D) is exact but the
    # rule is one split by any m); only the exact quotient exp(A-D)/exp(D-D) is made (above)
    # exponential_split: exp(A-D) -> exp(A-D)*exp(D-D), D the row maximum of an earlier nest
    ("exponential_split", SOFTMAX_SUM, "A:f32[4,8] -> E:f32[4]",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}"
     "+exp(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})*exp(D^{f32,g}_{tx}-D^{f32,g}_{tx});];"),
    # ... split by the neighbouring element
    ("exponential_split", SOFTMAX_SUM, "A:f32[4,8] -> E:f32[4]",
     "B^{4}_{tx=0}L^{8}_{a=0}[D^{f32,g}_{tx}=max(D^{f32,g}_{tx},A^{f32,g}_{tx,a});];"
     "B^{4}_{tx=0}L^{8}_{a=0}[E^{f32,g}_{tx}=E^{f32,g}_{tx}"
     "+exp(A^{f32,g}_{tx,a}-if_then_else(a-1<0,0,A^{f32,g}_{tx,a-1}))"
     "*exp(if_then_else(a-1<0,0,A^{f32,g}_{tx,a-1})-D^{f32,g}_{tx});];"),
]


def _steps(strategy: str, before: str, sig: str, form) -> set[str]:
    p = Program.parse(before, Signature.from_short(sig))
    return {form(t.after) for t in single_steps(p, strategy)}


def _form(text: str, sig: str, form) -> str:
    return form(Program.parse(text, Signature.from_short(sig)))


# structural moves compare in the canonical form; sympy's forms as the benchmark compares them,
# up to bit-exact re-printing (1.0 is 1, 1-x is -x+1)
CASES = ([(*m, canonical_text) for m in MOVES] + [(*m, exact_canonical_text) for m in SYMPY_MOVES])
REFUSALS = ([(*m, canonical_text) for m in REFUSED]
            + [(*m, exact_canonical_text) for m in SYMPY_REFUSED])


@pytest.mark.parametrize("strategy,before,sig,after,form", CASES,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(CASES)])
def test_reference_move_is_ours(strategy, before, sig, after, form):
    assert _form(after, sig, form) in _steps(strategy, before, sig, form)


@pytest.mark.parametrize("strategy,before,sig,after,form", REFUSALS,
                         ids=[f"{m[0]}-{i}" for i, m in enumerate(REFUSALS)])
def test_unsound_reference_move_is_refused(strategy, before, sig, after, form):
    assert _form(after, sig, form) not in _steps(strategy, before, sig, form)


# The swapped strategies: the reference's pair (q, p) is its forward strategy's step p -> q read
# backwards, p the translator's text (which no function of q can know); ours is an undo step
# ending at p (egraph.steps.undo_steps). (strategy, the translator's p, signature, the
# reference's q)
BN_SIG = "A:f32[4,8] D:f32[4] G:f32[4] M:f32[8] O:f32[8] -> C:f32[4,8]"
VARIANCE = "B^{4}_{tx=0}[E^{f32,g}_{tx}=G^{f32,g}_{tx}*G^{f32,g}_{tx};];"  # E >= 0: sqrt(E+eps) > 0
UNDONE = [
    # expand_powsimp: sympy's quotient back to the translator's product with a reciprocal
    ("expand_powsimp",
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}*(1/(1+exp(-A^{f32,g}_{tx,a})));];",
     "A:f32[4,8] -> C:f32[4,8]",
     "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=A^{f32,g}_{tx,a}/(1+exp(-A^{f32,g}_{tx,a}));];"),
    # expand_collect: a batch norm's scale, flattened by sympy, nested again as torch wrote it
    ("expand_collect",
     VARIANCE + "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=M^{f32,g}_{a}*((A^{f32,g}_{tx,a}-D^{f32,g}_{tx})"
     "/sqrt(E^{f32,g}_{tx}+1e-05))+O^{f32,g}_{a};];", BN_SIG,
     VARIANCE + "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=M^{f32,g}_{a}*(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})"
     "/sqrt(E^{f32,g}_{tx}+1.0e-5)+O^{f32,g}_{a};];"),
]
# apart: together's single fraction taken apart into the translator's sum. On raw inputs the
# sum M*(A-D)+O*sqrt(E+eps) may overflow where its two quotients do not (apart's (A-D)/0.5 ->
# A/0.5-D/0.5 gives NaN for A = D = 2e38), so the step is refused (MathQuotientsInRange)
UNDO_REFUSED = [
    ("apart",
     VARIANCE + "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=M^{f32,g}_{a}*((A^{f32,g}_{tx,a}-D^{f32,g}_{tx})"
     "/sqrt(E^{f32,g}_{tx}+1e-05))+O^{f32,g}_{a};];", BN_SIG,
     VARIANCE + "B^{4}_{tx=0}L^{8}_{a=0}[C^{f32,g}_{tx,a}=(M^{f32,g}_{a}*(A^{f32,g}_{tx,a}-D^{f32,g}_{tx})"
     "+O^{f32,g}_{a}*sqrt(E^{f32,g}_{tx}+1.0e-5))/sqrt(E^{f32,g}_{tx}+1.0e-5);];"),
]


@pytest.mark.parametrize("strategy,p,sig,q", UNDONE, ids=[m[0] for m in UNDONE])
def test_swapped_reference_move_is_an_undo_step(strategy, p, sig, q):
    from leir_egraph.egraph.steps import undo_steps
    target = Program.parse(p, Signature.from_short(sig))
    undone = {exact_canonical_text(t.before): t for t in undo_steps(target, strategy)}
    step = undone[_form(q, sig, exact_canonical_text)]
    assert step.after is target and step.strategy == strategy
    assert step.rule.startswith("undo ")
    assert "written back as" in step.cot and step.site.text in step.before.text


@pytest.mark.parametrize("strategy,p,sig,q", UNDO_REFUSED, ids=[m[0] for m in UNDO_REFUSED])
def test_unsound_swapped_reference_move_is_refused(strategy, p, sig, q):
    from leir_egraph.egraph.steps import undo_steps
    target = Program.parse(p, Signature.from_short(sig))
    undone = {exact_canonical_text(t.before) for t in undo_steps(target, strategy)}
    assert _form(q, sig, exact_canonical_text) not in undone
