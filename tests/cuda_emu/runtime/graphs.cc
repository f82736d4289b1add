// Stream capture and CUDA graphs on the emulated device: see graphs.h.
#include "graphs.h"
#include <cctype>
#include <set>
#include "state.h"

using namespace hs_emu;

struct CUgraph_st {
  std::vector<Node> nodes;
};
struct CUgraphExec_st {
  std::vector<Node> nodes;
};

namespace {
struct GraphRegistry {
  std::set<const void *> graphs, execs;
  std::vector<Capture *> active; // captures begun and not yet ended
};
GraphRegistry &graph_registry() {
  static GraphRegistry *r = new GraphRegistry; // never freed, like streams and events
  return *r;
}

std::string kind_of(const std::string &label) {
  std::string k;
  for (char c : label)
    if (!isdigit(static_cast<unsigned char>(c))) k += c;
  return k;
}

void add_node(CUstream_st *s, Node n) {
  Capture *c = s->capture;
  if (c->invalid) return;
  c->issued[s]++;
  c->nodes.push_back(std::move(n));
}
} // namespace

namespace hs_emu {

void capture_node(CUstream_st *s, std::string label, std::function<void()> run) {
  std::string kind = kind_of(label);
  add_node(s, Node{Node::Work, std::move(label), std::move(kind), std::move(run), nullptr, nullptr});
}

void capture_event_node(CUstream_st *s, Node::Type type, CUevent_st *e) {
  const char *label = type == Node::EventRecord ? "cudaEventRecord (external)" : "cudaStreamWaitEvent (external)";
  add_node(s, Node{type, label, label, nullptr, nullptr, e});
}

void capture_launch_hook(CUstream_st *s, std::function<void()> hook) {
  if (s->capture && !s->capture->invalid && !s->capture->nodes.empty()) s->capture->nodes.back().on_launch = std::move(hook);
}

cudaError_t invalidate_capture(CUstream_st *s, cudaError_t why) {
  if (s->capture) s->capture->invalid = true;
  return record_error(why);
}

bool refuse_during_capture(bool any_mode) {
  bool refused = false;
  for (Capture *c : graph_registry().active)
    if (any_mode || c->mode != cudaStreamCaptureModeRelaxed) {
      c->invalid = true;
      refused = true;
    }
  return refused;
}

} // namespace hs_emu

extern "C" cudaError_t cudaStreamBeginCapture(cudaStream_t stream, cudaStreamCaptureMode mode) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  if (mode < cudaStreamCaptureModeGlobal || mode > cudaStreamCaptureModeRelaxed) return record_error(cudaErrorInvalidValue);
  if (s->legacy) return record_error(cudaErrorStreamCaptureUnsupported); // the legacy stream cannot capture
  if (s->capture) return record_error(cudaErrorIllegalState);
  Capture *c = new Capture{s, mode, false, false, {}, {s}, {}, {}};
  s->capture = c;
  graph_registry().active.push_back(c);
  return cudaSuccess;
}

extern "C" cudaError_t cudaStreamEndCapture(cudaStream_t stream, cudaGraph_t *pGraph) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  if (pGraph == nullptr) return record_error(cudaErrorInvalidValue);
  *pGraph = nullptr;
  Capture *c = s->capture;
  if (c == nullptr) return record_error(cudaErrorIllegalState);
  if (c->origin != s) return invalidate_capture(s, cudaErrorStreamCaptureUnmatched);
  cudaError_t result = c->invalid ? cudaErrorStreamCaptureInvalidated : cudaSuccess;
  for (CUstream_st *t : c->streams) {
    if (result == cudaSuccess && t != s && c->issued[t] > c->joined[t]) result = cudaErrorStreamCaptureUnjoined;
    t->capture = nullptr;
  }
  c->ended = true;
  auto &active = graph_registry().active;
  for (size_t i = 0; i < active.size(); i++)
    if (active[i] == c) active.erase(active.begin() + static_cast<long>(i));
  if (result != cudaSuccess) return record_error(result);
  CUgraph_st *g = new CUgraph_st{std::move(c->nodes)};
  c->nodes.clear();
  graph_registry().graphs.insert(g);
  g_stats.graph_captures++;
  *pGraph = g;
  return cudaSuccess;
}

extern "C" cudaError_t cudaStreamIsCapturing(cudaStream_t stream, cudaStreamCaptureStatus *pCaptureStatus) {
  HS_EMU_API_ENTER;
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  if (pCaptureStatus == nullptr) return record_error(cudaErrorInvalidValue);
  *pCaptureStatus = s->capture == nullptr ? cudaStreamCaptureStatusNone
                    : s->capture->invalid ? cudaStreamCaptureStatusInvalidated
                                          : cudaStreamCaptureStatusActive;
  return cudaSuccess;
}

extern "C" cudaError_t cudaGraphInstantiate(cudaGraphExec_t *pGraphExec, cudaGraph_t graph, unsigned long long flags) {
  HS_EMU_API_ENTER;
  if (pGraphExec == nullptr || flags != 0) return record_error(cudaErrorInvalidValue);
  if (graph_registry().graphs.count(graph) == 0) return record_error(cudaErrorInvalidValue);
  CUgraphExec_st *x = new CUgraphExec_st{graph->nodes};
  graph_registry().execs.insert(x);
  *pGraphExec = x;
  return cudaSuccess;
}

extern "C" cudaError_t cudaGraphExecUpdate(cudaGraphExec_t hGraphExec, cudaGraph_t hGraph,
                                           cudaGraphExecUpdateResultInfo *resultInfo) {
  HS_EMU_API_ENTER;
  GraphRegistry &r = graph_registry();
  if (r.execs.count(hGraphExec) == 0 || r.graphs.count(hGraph) == 0) return record_error(cudaErrorInvalidValue);
  cudaGraphExecUpdateResult result = cudaGraphExecUpdateSuccess;
  const std::vector<Node> &now = hGraphExec->nodes, &next = hGraph->nodes;
  if (now.size() != next.size()) result = cudaGraphExecUpdateErrorTopologyChanged;
  for (size_t i = 0; i < now.size() && result == cudaGraphExecUpdateSuccess; i++)
    if (now[i].type != next[i].type) result = cudaGraphExecUpdateErrorNodeTypeChanged;
    else if (now[i].kind != next[i].kind) result = cudaGraphExecUpdateErrorFunctionChanged;
  if (resultInfo) *resultInfo = cudaGraphExecUpdateResultInfo{result, nullptr, nullptr};
  if (result != cudaGraphExecUpdateSuccess) return record_error(cudaErrorGraphExecUpdateFailure);
  hGraphExec->nodes = next; // the new arguments, host scalars and events
  return cudaSuccess;
}

extern "C" cudaError_t cudaGraphLaunch(cudaGraphExec_t graphExec, cudaStream_t stream) {
  HS_EMU_API_ENTER;
  if (graph_registry().execs.count(graphExec) == 0) return record_error(cudaErrorInvalidResourceHandle);
  cudaError_t err;
  CUstream_st *s = resolve_stream(stream, &err);
  if (s == nullptr) return record_error(err);
  if (s->capture && s->capture->invalid) return record_error(cudaErrorStreamCaptureInvalidated);
  for (const Node &n : graphExec->nodes) {
    if (n.on_launch) n.on_launch();
    switch (n.type) {
    case Node::Work: enqueue(s, n.label, n.run); break;
    case Node::EventRecord: record_event(n.event, s, cudaEventRecordDefault); break;
    case Node::EventWait: wait_event(s, n.event, cudaEventWaitDefault); break;
    }
  }
  g_stats.graph_launches++;
  g_stats.graph_nodes += graphExec->nodes.size();
  return cudaSuccess;
}

extern "C" cudaError_t cudaGraphExecDestroy(cudaGraphExec_t graphExec) {
  HS_EMU_API_ENTER;
  if (graph_registry().execs.erase(graphExec) == 0) return record_error(cudaErrorInvalidValue);
  delete graphExec; // launched work holds its own copies of the nodes' functions
  return cudaSuccess;
}

extern "C" cudaError_t cudaGraphDestroy(cudaGraph_t graph) {
  HS_EMU_API_ENTER;
  if (graph_registry().graphs.erase(graph) == 0) return record_error(cudaErrorInvalidValue);
  delete graph;
  return cudaSuccess;
}

// Only the count (nodes == NULL): the emulator has no node handles.
extern "C" cudaError_t cudaGraphGetNodes(cudaGraph_t graph, cudaGraphNode_t *nodes, size_t *numNodes) {
  HS_EMU_API_ENTER;
  if (graph_registry().graphs.count(graph) == 0 || numNodes == nullptr) return record_error(cudaErrorInvalidValue);
  if (nodes != nullptr) return record_error(cudaErrorNotSupported);
  *numNodes = graph->nodes.size();
  return cudaSuccess;
}
