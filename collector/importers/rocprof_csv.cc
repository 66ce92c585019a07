// rocprof / rocprofv2 / rocprofv3 CSV traces -> records (rocprof_csv.h).
#include "collector/importers/rocprof_csv.h"

#include <algorithm>
#include <array>
#include <cctype>
#include <initializer_list>

#include "collector/importers/line_reader.h"

namespace chronolink::collector {
namespace {

bool SameName(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// Where each column the import uses sits in a row (-1: absent).
struct CsvSchema {
  RocprofFormat format = RocprofFormat::kV3KernelCsv;
  size_t fields = 0;
  int start = -1, end = -1, name = -1, agent = -1, queue = -1, corr = -1, thread = -1;
  int direction = -1, src_agent = -1, dst_agent = -1, bytes = -1;
  std::array<int, 3> grid{-1, -1, -1}, block{-1, -1, -1};
  int lds = -1, scratch = -1, vgpr = -1, sgpr = -1;
  std::string start_column, end_column;
};

class HeaderIndex {
 public:
  explicit HeaderIndex(const std::vector<std::string>& header) : header_(header) {}
  int Find(std::initializer_list<std::string_view> names) const {
    for (std::string_view n : names) {
      for (size_t i = 0; i < header_.size(); ++i) {
        if (SameName(header_[i], n)) return static_cast<int>(i);
      }
    }
    return -1;
  }

 private:
  const std::vector<std::string>& header_;
};

void MapV1(const HeaderIndex& h, CsvSchema* s) {
  s->format = RocprofFormat::kV1Csv;
  s->start_column = "BeginNs";
  s->end_column = "EndNs";
  s->name = h.Find({"KernelName"});
  s->agent = h.Find({"gpu-id"});
  s->queue = h.Find({"queue-id"});
  s->thread = h.Find({"tid"});
  s->grid[0] = h.Find({"grd"});
  s->block[0] = h.Find({"wgr"});
  s->lds = h.Find({"lds"});
  s->scratch = h.Find({"scr"});
  s->vgpr = h.Find({"arch_vgpr", "vgpr"});
  s->sgpr = h.Find({"sgpr"});
}

void MapV2(const HeaderIndex& h, CsvSchema* s) {
  s->format = RocprofFormat::kV2Csv;
  s->name = h.Find({"Kernel_Name"});
  s->agent = h.Find({"GPU_ID"});
  s->queue = h.Find({"Queue_ID"});
  s->thread = h.Find({"TID"});
  s->corr = h.Find({"Correlation_ID"});
  s->grid[0] = h.Find({"Grid_Size"});
  s->block[0] = h.Find({"Workgroup_Size"});
  s->lds = h.Find({"LDS_Per_Workgroup"});
  s->scratch = h.Find({"Scratch_Per_Workitem"});
  s->vgpr = h.Find({"Arch_VGPR"});
  s->sgpr = h.Find({"SGPR"});
}

void MapV3Kernel(const HeaderIndex& h, CsvSchema* s) {
  s->format = RocprofFormat::kV3KernelCsv;
  s->name = h.Find({"Kernel_Name"});
  s->agent = h.Find({"Agent_Id"});
  s->queue = h.Find({"Queue_Id"});
  s->thread = h.Find({"Thread_Id"});
  s->corr = h.Find({"Correlation_Id"});
  s->grid = {h.Find({"Grid_Size_X"}), h.Find({"Grid_Size_Y"}), h.Find({"Grid_Size_Z"})};
  s->block = {h.Find({"Workgroup_Size_X"}), h.Find({"Workgroup_Size_Y"}), h.Find({"Workgroup_Size_Z"})};
  s->lds = h.Find({"LDS_Block_Size", "Group_Segment_Size"});
  s->scratch = h.Find({"Scratch_Size", "Private_Segment_Size"});
  s->vgpr = h.Find({"VGPR_Count", "Arch_VGPR_Count"});
  s->sgpr = h.Find({"SGPR_Count"});
}

void MapV3Copy(const HeaderIndex& h, CsvSchema* s) {
  s->format = RocprofFormat::kV3MemoryCopyCsv;
  s->direction = h.Find({"Direction"});
  s->src_agent = h.Find({"Source_Agent_Id"});
  s->dst_agent = h.Find({"Destination_Agent_Id"});
  s->corr = h.Find({"Correlation_Id"});
  s->thread = h.Find({"Thread_Id"});
  s->bytes = h.Find({"Bytes", "Size"});
  s->queue = h.Find({"Stream_Id", "Queue_Id"});
}

bool DetectSchema(const std::vector<std::string>& header, CsvSchema* s, std::string* why) {
  const HeaderIndex h(header);
  s->fields = header.size();
  if (h.Find({"BeginNs"}) >= 0) {
    s->start = h.Find({"BeginNs"});
    s->end = h.Find({"EndNs"});
    MapV1(h, s);
  } else if (h.Find({"Start_Timestamp"}) >= 0) {
    s->start = h.Find({"Start_Timestamp"});
    s->end = h.Find({"End_Timestamp"});
    s->start_column = "Start_Timestamp";
    s->end_column = "End_Timestamp";
    if (h.Find({"Direction"}) >= 0) {
      MapV3Copy(h, s);
    } else if (h.Find({"GPU_ID"}) >= 0) {
      MapV2(h, s);
    } else {
      MapV3Kernel(h, s);
    }
  } else {
    *why = "no BeginNs or Start_Timestamp column: not a rocprof kernel trace";
    return false;
  }
  const bool copies = s->format == RocprofFormat::kV3MemoryCopyCsv;
  std::vector<std::string> missing;
  if (s->end < 0) missing.push_back(s->format == RocprofFormat::kV1Csv ? "EndNs" : "End_Timestamp");
  if (!copies && s->name < 0) missing.push_back("the kernel name");
  if (!copies && s->agent < 0) missing.push_back("the GPU / agent id");
  if (copies && (s->direction < 0 || s->src_agent < 0 || s->dst_agent < 0)) {
    missing.push_back("Direction, Source_Agent_Id and Destination_Agent_Id");
  }
  if (missing.empty()) return true;
  *why = std::string(RocprofFormatName(s->format)) + " header lacks ";
  for (size_t i = 0; i < missing.size(); ++i) *why += (i > 0 ? ", " : "") + missing[i];
  return false;
}

std::string_view Field(const std::vector<std::string>& f, int i) {
  return i >= 0 ? std::string_view(f[static_cast<size_t>(i)]) : std::string_view();
}

// "grid:X,Y,Z block:X,Y,Z static_shared:L scratch:S regs:V sgprs:G", the parts the file has.
std::string KernelDetails(const CsvSchema& s, const std::vector<std::string>& f) {
  std::string out;
  auto add = [&out](const std::string& part) { out += (out.empty() ? "" : " ") + part; };
  auto dims = [&f](const std::array<int, 3>& cols) {
    std::string d;
    for (int c : cols) {
      if (c < 0) continue;
      d += (d.empty() ? "" : ",") + std::string(Field(f, c));
    }
    return d;
  };
  if (const std::string g = dims(s.grid); !g.empty()) add("grid:" + g);
  if (const std::string b = dims(s.block); !b.empty()) add("block:" + b);
  if (s.lds >= 0) add("static_shared:" + std::string(Field(f, s.lds)));
  if (s.scratch >= 0) add("scratch:" + std::string(Field(f, s.scratch)));
  if (s.vgpr >= 0) add("regs:" + std::string(Field(f, s.vgpr)));
  if (s.sgpr >= 0) add("sgprs:" + std::string(Field(f, s.sgpr)));
  return out;
}

bool ParseCopyDirection(const CsvSchema& s, const std::vector<std::string>& f, RocprofRecord* r, bool* skip,
                        std::string* why) {
  const std::string_view dir = Field(f, s.direction);
  int gpu_column = -1;
  if (dir.find("HOST_TO_DEVICE") != std::string_view::npos) {
    r->kind = ActivityKind::kMemcpyHtoD;
    gpu_column = s.dst_agent;
  } else if (dir.find("DEVICE_TO_HOST") != std::string_view::npos) {
    r->kind = ActivityKind::kMemcpyDtoH;
    gpu_column = s.src_agent;
  } else if (dir.find("DEVICE_TO_DEVICE") != std::string_view::npos) {
    r->kind = ActivityKind::kMemcpyDtoD;
    gpu_column = s.src_agent;
  } else if (dir.find("HOST_TO_HOST") != std::string_view::npos) {
    *skip = true;  // no GPU took part
    return true;
  } else {
    *why = "unknown copy direction '" + std::string(dir.substr(0, 40)) + "'";
    return false;
  }
  return ParseAgentId(Field(f, gpu_column), &r->agent_id, why) &&
         ParseUnsigned(Field(f, s.bytes), "Bytes", &r->bytes, why);
}

bool ParseGpu(const CsvSchema& s, const std::vector<std::string>& f, RocprofRecord* r, std::string* why) {
  if (s.format != RocprofFormat::kV1Csv) return ParseAgentId(Field(f, s.agent), &r->agent_id, why);
  // rocprof's gpu-id is the GPU's index: the ordinal.
  uint64_t id = 0;
  if (!ParseUnsigned(Field(f, s.agent), "gpu-id", &id, why)) return false;
  if (id > 0xFFFF) {
    *why = "gpu-id " + std::to_string(id) + " is not a GPU index";
    return false;
  }
  r->ordinal_known = true;
  r->ordinal = static_cast<uint32_t>(id);
  return true;
}

bool ParseRow(const CsvSchema& s, const std::vector<std::string>& f, RocprofRecord* r, bool* skip,
              std::string* why) {
  if (!ParseTimestampNs(Field(f, s.start), s.start_column, &r->start_ns, why) ||
      !ParseTimestampNs(Field(f, s.end), s.end_column, &r->end_ns, why) ||
      !CheckSpan(r->start_ns, r->end_ns, why) || !ParseUnsigned(Field(f, s.queue), "queue", &r->queue, why) ||
      !ParseUnsigned(Field(f, s.corr), "correlation id", &r->correlation_id, why) ||
      !ParseUnsigned(Field(f, s.thread), "thread id", &r->thread_id, why)) {
    return false;
  }
  if (s.format == RocprofFormat::kV3MemoryCopyCsv) return ParseCopyDirection(s, f, r, skip, why);
  r->kind = ActivityKind::kKernel;
  r->name = std::string(Field(f, s.name));
  r->details = KernelDetails(s, f);
  return ParseGpu(s, f, r, why);
}

bool IsBlank(std::string_view line) { return line.find_first_not_of(" \t") == std::string_view::npos; }

bool ReadCsv(LineReader* reader, const RocprofReadOptions& options, std::vector<RocprofRecord>* out,
             RocprofReadResult* result, std::string* error) {
  *result = RocprofReadResult{};
  CsvSchema schema;
  bool have_header = false;
  std::string line;
  bool truncated = false;
  std::vector<std::string> fields;
  while (reader->Next(&line, &truncated)) {
    if (IsBlank(line)) continue;
    const uint64_t number = reader->line_number();
    if (!have_header) {
      if (line.rfind("\xEF\xBB\xBF", 0) == 0) line.erase(0, 3);  // a UTF-8 byte order mark
      std::string why;
      if (truncated) {
        why = "the header is longer than the line limit";
      } else if (!SplitCsvLine(line, &fields)) {
        why = "the header has an unterminated quote";
      } else {
        DetectSchema(fields, &schema, &why);
      }
      if (!why.empty()) {
        *error = "line " + std::to_string(number) + ": " + why;
        return false;
      }
      result->format = schema.format;
      have_header = true;
      continue;
    }
    ++result->rows;
    if (truncated) {
      result->Refuse(number, "longer than " + std::to_string(options.max_line_bytes) + " bytes");
      continue;
    }
    if (!SplitCsvLine(line, &fields)) {
      result->Refuse(number, "an unterminated quote or text after a closing quote");
      continue;
    }
    if (fields.size() != schema.fields) {
      result->Refuse(
          number, std::to_string(fields.size()) + " fields, the header has " + std::to_string(schema.fields));
      continue;
    }
    RocprofRecord r;
    bool skip = false;
    std::string why;
    if (!ParseRow(schema, fields, &r, &skip, &why)) {
      result->Refuse(number, why);
      continue;
    }
    if (skip) {
      ++result->skipped;
      continue;
    }
    if (out->size() >= options.max_records) {
      *error = "more than " + std::to_string(options.max_records) + " records: refusing to hold them all";
      return false;
    }
    out->push_back(std::move(r));
    ++result->accepted;
  }
  if (!reader->ok()) {
    *error = reader->error();
    return false;
  }
  if (!have_header) {
    *error = "empty: no header row";
    return false;
  }
  return result->Acceptable(options, error);
}

}  // namespace

bool SplitCsvLine(std::string_view line, std::vector<std::string>* fields) {
  fields->clear();
  std::string field;
  size_t i = 0;
  while (true) {
    field.clear();
    if (i < line.size() && line[i] == '"') {
      ++i;
      while (true) {
        if (i >= line.size()) return false;  // unterminated
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            field += '"';
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        field += line[i++];
      }
      if (i < line.size() && line[i] != ',') return false;  // text after the closing quote
    } else {
      const size_t comma = line.find(',', i);
      const size_t stop = comma == std::string_view::npos ? line.size() : comma;
      field.assign(line.substr(i, stop - i));
      i = stop;
    }
    fields->push_back(field);
    if (i >= line.size()) return true;
    ++i;  // past ','
  }
}

bool ReadRocprofCsv(const std::filesystem::path& path, const RocprofReadOptions& options,
                    std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error) {
  LineReader reader(path, options.max_line_bytes);
  if (!reader.ok()) {
    *error = reader.error();
    return false;
  }
  if (ReadCsv(&reader, options, out, result, error)) return true;
  *error = path.string() + ": " + *error;
  return false;
}

bool ParseRocprofCsv(std::string_view bytes, const RocprofReadOptions& options,
                     std::vector<RocprofRecord>* out, RocprofReadResult* result, std::string* error) {
  LineReader reader(bytes, options.max_line_bytes);
  return ReadCsv(&reader, options, out, result, error);
}

}  // namespace chronolink::collector
