// The report's look in one place: page geometry, the CSS style sheet every
// element's class refers to, and the hatch patterns that mark gaps. System
// fonts only (the picture must render the same offline, in a browser or in
// rsvg-convert), no scripts. Constants; thread-safe.
#pragma once

namespace chronolink::trace::report {

inline constexpr double kPageWidth = 1280;
inline constexpr double kMargin = 32;
inline constexpr double kContentRight = kPageWidth - kMargin;

// CSS without '<', '>' or '&', so it needs no escaping inside <style>.
inline constexpr char kStyleSheet[] = R"css(
svg { background: #ffffff; }
text { font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", "Helvetica Neue", Arial, sans-serif;
       font-size: 12px; fill: #1f2933; font-variant-numeric: tabular-nums; }
.page { fill: #ffffff; }
.title { font-size: 22px; font-weight: 700; }
.subtitle { font-size: 13px; fill: #4b5563; }
.section { font-size: 16px; font-weight: 700; }
.explain { font-size: 12px; fill: #4b5563; }
.muted { fill: #6b7280; }
.small { font-size: 11px; }
.tick { font-size: 10.5px; fill: #4b5563; }
.axis-label { font-size: 11.5px; fill: #374151; }
.strong { font-weight: 700; }
.bad { fill: #b91c1c; font-weight: 700; }
.good { fill: #047857; font-weight: 700; }
.warn { fill: #b45309; font-weight: 700; }
.tag { font-size: 10.5px; fill: #1d4ed8; font-weight: 700; }
.rule { stroke: #d1d5db; stroke-width: 1; }
.frame { fill: #fbfbfc; stroke: #9ca3af; stroke-width: 1; }
.grid { stroke: #e5e7eb; stroke-width: 1; }
.zero { stroke: #9ca3af; stroke-width: 1; stroke-dasharray: 2 2; }
.offset-line { fill: none; stroke: #1d4ed8; stroke-width: 1.5; stroke-linejoin: round; }
.offset-dot { fill: #1d4ed8; }
.sigma-area { fill: #ddd6fe; stroke: none; }
.sigma-line { fill: none; stroke: #6d28d9; stroke-width: 1.2; stroke-linejoin: round; }
.sigma-dot { fill: #6d28d9; }
.unreachable { fill: url(#hatch-unreachable); stroke: #dc2626; stroke-width: 0.8; }
.missing { fill: url(#hatch-missing); stroke: #9ca3af; stroke-width: 0.8; }
.set-aside { fill: url(#hatch-set-aside); stroke: #d97706; stroke-width: 0.8; }
.set-aside-mark { fill: #ffffff; stroke: #b45309; stroke-width: 1.4; }
.gap-tick { stroke: #dc2626; stroke-width: 2; }
.origin { stroke: #047857; stroke-width: 1.2; stroke-dasharray: 5 3; }
.origin-label { font-size: 10.5px; fill: #047857; font-weight: 700; }
.row-band { fill: #f9fafb; }
.header-band { fill: #eef2f7; }
.bar-before { fill: #f59e0b; }
.bar-after { fill: #0d9488; }
.swatch-line { stroke-width: 3; }
.footer { font-size: 11px; fill: #6b7280; }
)css";

// Diagonal hatching: red where a node was unreachable, grey where the
// offsets hold no line for it at all, amber where the trace correction set
// a stalled agent's instant aside.
inline constexpr char kHatchPatterns[] =
    R"svg(<pattern id="hatch-unreachable" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#fee2e2"/><line x1="0" y1="0" x2="0" y2="6" stroke="#dc2626" stroke-width="2.2"/></pattern>
<pattern id="hatch-missing" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(45)"><rect width="6" height="6" fill="#f3f4f6"/><line x1="0" y1="0" x2="0" y2="6" stroke="#9ca3af" stroke-width="2"/></pattern>
<pattern id="hatch-set-aside" patternUnits="userSpaceOnUse" width="6" height="6" patternTransform="rotate(-45)"><rect width="6" height="6" fill="#fef3c7"/><line x1="0" y1="0" x2="0" y2="6" stroke="#d97706" stroke-width="1.6"/></pattern>
)svg";

}  // namespace chronolink::trace::report
