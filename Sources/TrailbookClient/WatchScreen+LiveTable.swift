import TrailbookProtocol

extension WatchScreen {
    /// The live rows as a table whose columns line up; columns are dropped, least useful first, when the
    /// terminal is too narrow, and the bar takes the room left (between 8 and 40 columns).
    struct LiveTable {
        enum Column: CaseIterable {
            case mark, kind, id, label, bar, percent, amount, rate, eta, elapsed, attempt, status
        }

        var cells: [[Column: Span]] = []
        var fractions: [Double] = []
        /// Rows not running show their status (often a reason in words) right after the amount, over the
        /// rate, ETA, elapsed and attempt columns they have no use for.
        var running: [Bool] = []
        var columns: [Column] = []
        /// Each column's width (its widest cell; for `status`, the widest of running rows), measured once.
        private var widths: [Column: Int] = [:]
        var barWidth = 0
        let width: Int

        init(rows: [Row], width: Int, now: Double) {
            self.width = width
            for row in rows {
                var cell: [Column: Span] = [:]
                cell[.kind] = Span(row.kind, .bold)
                cell[.id] = Span(String(row.id.prefix(8)), .dim)
                cell[.label] = Span(WatchScreen.truncate(Self.label(row), 24))
                cell[.percent] = Span(row.total > 0 ? WatchScreen.percent(row.fraction) : "", .bold)
                cell[.amount] = Span(
                    WatchScreen.amount(row) + (row.files.map { ", " + $0 } ?? "") + (row.phase.map { ", " + $0 } ?? ""))
                cell[.rate] = Span(row.rate.map { Self.rate($0, unit: row.unit) } ?? "", .dim)
                cell[.eta] = Span(row.state == .running ? row.eta.map { "ETA " + JobText.duration($0) } ?? "" : "", .dim)
                cell[.elapsed] = Span(WatchScreen.elapsed(row, now: now).map { WatchScreen.clock($0) } ?? "", .dim)
                cell[.attempt] = Span(row.maxAttempts > 0 ? "try \(row.attempt)/\(row.maxAttempts)" : "", .dim)
                let reason = WatchScreen.reason(row, now: now)
                cell[.status] = Span(
                    reason.map {
                        // A reason that already names the state ("paused by you …") stands alone.
                        row.state == .needsRetry || row.state == .queued || $0.hasPrefix(row.state.rawValue)
                            ? $0 : row.state.rawValue + " — " + $0
                    }
                        ?? row.state.rawValue.split(separator: "_").joined(separator: " "),
                    WatchScreen.style(of: row.state))
                cells.append(cell)
                fractions.append(row.fraction)
                running.append(row.state == .running)
            }
            for column in Column.allCases { widths[column] = measuredWidth(column) }
            // Drop columns, least useful first, until the bar gets at least 12 columns; the bar itself goes only
            // when even the essentials leave it less than 6.
            let dropOrder: [Column] = [.elapsed, .id, .attempt, .rate, .eta, .label, .amount, .bar, .kind]
            var chosen = Column.allCases
            for column in [nil] + dropOrder.map(Optional.some) {
                if let column { chosen.removeAll { $0 == column } }
                let fixed = chosen.filter { $0 != .bar && $0 != .status }.reduce(0) { $0 + columnWidth($1) + 1 }
                // Room for the status: the running rows' in full; a waiting row's reason may spill over the
                // columns it skips.
                let skipped = chosen.filter { [.rate, .eta, .elapsed, .attempt].contains($0) }.reduce(0) { $0 + columnWidth($1) + 1 }
                let waiting = cells.indices.filter { !running[$0] }.map { (cells[$0][.status].map { TerminalText.columns($0.text) } ?? 0) - skipped }
                let status = max(columnWidth(.status), min(32, waiting.max() ?? 0))
                let room = width - fixed - status - 1
                let minimum = chosen.contains(.label) ? 12 : 6
                // Without the bar, the kind goes too unless the rest fits: the percent and the state stay.
                if chosen.contains(.bar) ? room >= minimum : room >= -1 || !chosen.contains(.kind) {
                    barWidth = chosen.contains(.bar) ? min(40, room) : 0
                    break
                }
            }
            columns = chosen
        }

        private static func label(_ row: Row) -> String {
            if let current = row.current, !current.isEmpty, row.state == .running { return current }
            return row.label
        }

        private static func rate(_ rate: Double, unit: String) -> String {
            if unit == ProgressUnit.bytes.rawValue { return ByteCount.format(Int64(rate)) + "/s" }
            return (rate >= 10 ? String(Int(rate.rounded())) : String(Int(rate * 10) / 10) + "." + String(Int(rate * 10) % 10))
                + "/s"
        }

        func columnWidth(_ column: Column) -> Int {
            column == .bar ? barWidth : widths[column] ?? 0
        }

        private func measuredWidth(_ column: Column) -> Int {
            switch column {
            case .mark: return 1
            case .bar: return 0
            case .status:
                return cells.indices.filter { running[$0] }.map { cells[$0][.status].map { TerminalText.columns($0.text) } ?? 0 }
                    .max() ?? 0
            default: return cells.map { $0[column].map { TerminalText.columns($0.text) } ?? 0 }.max() ?? 0
            }
        }

        func line(_ index: Int, selected: Bool) -> Line {
            var spans: [Span] = []
            for column in columns {
                if !running[index], [.rate, .eta, .elapsed, .attempt].contains(column) { continue }
                switch column {
                case .mark: spans.append(Span(selected ? "▸" : " ", .bold))
                case .bar: spans.append(Span(WatchScreen.bar(fractions[index], width: barWidth), .cyan))
                case .status: spans.append(cells[index][.status] ?? Span(""))
                default:
                    let cell = cells[index][column] ?? Span("")
                    let rightAligned = [.percent, .amount, .rate].contains(column)
                    let columnWidth = self.columnWidth(column)
                    if columnWidth == 0 { continue }
                    spans.append(Span(WatchScreen.pad(cell.text, columnWidth, right: rightAligned), cell.style))
                }
                if column != .status { spans.append(Span(" ")) }
            }
            var line = WatchScreen.fit(spans, width)
            if selected {
                line = line.map { span in span.style == .cyan ? span : Span(span.text, .inverse) }
            }
            return line
        }
    }
}
