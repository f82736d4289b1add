/* Stand-in for CUDA's vector_types.h on the emulated device (tests only; tests/cuda_emu/).
 * dim3, uint3 and the built-in vector types with CUDA's member names, sizes and alignment
 * (CUDA C++ Programming Guide, "Built-in Vector Types" and "dim3"). Usable from C and C++. */
#ifndef HS_EMU_VECTOR_TYPES_H
#define HS_EMU_VECTOR_TYPES_H

#define HS_EMU_VEC2(T, name, align) struct __attribute__((aligned(align))) name { T x, y; };
#define HS_EMU_VEC3(T, name) struct name { T x, y, z; };
#define HS_EMU_VEC4(T, name, align) struct __attribute__((aligned(align))) name { T x, y, z, w; };

HS_EMU_VEC2(int, int2, 8)
HS_EMU_VEC3(int, int3)
HS_EMU_VEC4(int, int4, 16)
HS_EMU_VEC2(unsigned int, uint2, 8)
HS_EMU_VEC3(unsigned int, uint3)
HS_EMU_VEC4(unsigned int, uint4, 16)
HS_EMU_VEC2(float, float2, 8)
HS_EMU_VEC3(float, float3)
HS_EMU_VEC4(float, float4, 16)
HS_EMU_VEC2(double, double2, 16)
HS_EMU_VEC4(unsigned char, uchar4, 4)
HS_EMU_VEC4(signed char, char4, 4)
#undef HS_EMU_VEC2
#undef HS_EMU_VEC3
#undef HS_EMU_VEC4

#ifndef __cplusplus
typedef struct int2 int2;
typedef struct int3 int3;
typedef struct int4 int4;
typedef struct uint2 uint2;
typedef struct uint3 uint3;
typedef struct uint4 uint4;
typedef struct float2 float2;
typedef struct float3 float3;
typedef struct float4 float4;
typedef struct double2 double2;
typedef struct uchar4 uchar4;
typedef struct char4 char4;
#endif

/* dim3: unspecified components are 1 (Programming Guide, "dim3"). */
struct dim3 {
  unsigned int x, y, z;
#ifdef __cplusplus
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
#endif
};
#ifndef __cplusplus
typedef struct dim3 dim3;
#endif

static inline int2 make_int2(int x, int y) { int2 v = {x, y}; return v; }
static inline int4 make_int4(int x, int y, int z, int w) { int4 v = {x, y, z, w}; return v; }
static inline uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { uint3 v = {x, y, z}; return v; }
static inline float2 make_float2(float x, float y) { float2 v = {x, y}; return v; }
static inline float3 make_float3(float x, float y, float z) { float3 v = {x, y, z}; return v; }
static inline float4 make_float4(float x, float y, float z, float w) { float4 v = {x, y, z, w}; return v; }
static inline double2 make_double2(double x, double y) { double2 v = {x, y}; return v; }

#endif
