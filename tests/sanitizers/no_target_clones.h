/* Force-included (-include) by the ThreadSanitizer build (configure --enable-sanitizers=thread).
 * GCC's resolvers of target_clones functions (src/backend/cpu/cpu_simd.h, cpu_winograd.c) run while
 * the dynamic loader relocates the program, before the TSan runtime is set up; instrumented by
 * -fsanitize=thread they crash every program at load (SIGSEGV in the resolver). In this build each such
 * function keeps only its default version: the attribute becomes `unused`. */
#define target_clones(...) __unused__
